//! Helpers shared by the robustness tests (`corruption`, `bad_input`,
//! `concurrency`, `crash` and `limits`): the on-disk layout written out
//! independently of the crate, byte-level damage, record contents that are a
//! pure function of the record index, small fixture stores, and the child
//! process harness.
//!
//! Each test binary uses a subset, hence `dead_code` (and, for the
//! `assert_err!` macro, `unused_macros`) is allowed.

#![allow(dead_code, clippy::unwrap_used)]

use std::cell::Cell;
use std::fs::{self, OpenOptions};
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use loaderx_core::ndarray::Array2;
use loaderx_core::{
    Codec, CreateOptions, Dense, DenseWriter, Error, Ragged, RaggedWriter, Store, digest,
};
use tempfile::TempDir;

// ---------------------------------------------------------------------------
// The on-disk layout (see `loaderx_core::format`).
// ---------------------------------------------------------------------------

pub(crate) const META: &str = "meta.zr";
pub(crate) const DICT: &str = "dict.zr";
/// u64 record count.
pub(crate) const LENGTH_AT: u64 = 0;
/// u16 schema length.
pub(crate) const SCHEMA_LENGTH_AT: u64 = 8;
/// u8 shard count.
pub(crate) const SHARDS_AT: u64 = 10;
/// u8 codec tag.
pub(crate) const CODEC_AT: u64 = 11;
/// Four reserved bytes.
pub(crate) const RESERVED_AT: u64 = 12;
/// 255 u64 shard tails.
pub(crate) const TAILS_AT: u64 = 16;
/// MsgPack schema.
pub(crate) const SCHEMA_AT: u64 = 2056;
/// The RecordLoc table.
pub(crate) const TABLE_AT: u64 = 4096;
pub(crate) const LOC_LEN: u64 = 16;

/// One entry of the location table: where a record's stored bytes are and
/// how long it is once decoded (little-endian u64, u32, u32). Declared here
/// rather than taken from the crate, so the tests check the format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecordLoc {
    pub(crate) offset: u64,
    pub(crate) phys_length: u32,
    pub(crate) logic_length: u32,
}

pub(crate) fn meta(store: &Path) -> PathBuf {
    store.join(META)
}

pub(crate) fn data(store: &Path, shard: usize) -> PathBuf {
    store.join(format!("data_{shard}.zr"))
}

pub(crate) fn read_bytes(file: &Path, at: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    fs::File::open(file)
        .unwrap()
        .read_exact_at(&mut buf, at)
        .unwrap();
    buf
}

/// Overwrites `bytes` at `at` in `file` (extending it if needed).
pub(crate) fn patch(file: &Path, at: u64, bytes: &[u8]) {
    OpenOptions::new()
        .write(true)
        .open(file)
        .unwrap()
        .write_all_at(bytes, at)
        .unwrap();
}

pub(crate) fn truncate(file: &Path, len: u64) {
    OpenOptions::new()
        .write(true)
        .open(file)
        .unwrap()
        .set_len(len)
        .unwrap();
}

pub(crate) fn flip_byte(file: &Path, at: u64, xor: u8) {
    let b = read_bytes(file, at, 1)[0];
    patch(file, at, &[b ^ xor]);
}

pub(crate) fn header_u8(store: &Path, at: u64) -> u8 {
    read_bytes(&meta(store), at, 1)[0]
}

pub(crate) fn set_length(store: &Path, length: u64) {
    patch(&meta(store), LENGTH_AT, &length.to_le_bytes());
}

pub(crate) fn tail(store: &Path, shard: usize) -> u64 {
    let b = read_bytes(&meta(store), TAILS_AT + 8 * shard as u64, 8);
    u64::from_le_bytes(b.try_into().unwrap())
}

pub(crate) fn set_tail(store: &Path, shard: usize, tail: u64) {
    patch(
        &meta(store),
        TAILS_AT + 8 * shard as u64,
        &tail.to_le_bytes(),
    );
}

pub(crate) fn set_schema(store: &Path, schema: &[u8]) {
    let len = u16::try_from(schema.len()).unwrap();
    patch(&meta(store), SCHEMA_LENGTH_AT, &len.to_le_bytes());
    patch(&meta(store), SCHEMA_AT, schema);
}

pub(crate) fn read_loc(store: &Path, index: u64) -> RecordLoc {
    let b = read_bytes(&meta(store), TABLE_AT + LOC_LEN * index, LOC_LEN as usize);
    RecordLoc {
        offset: u64::from_le_bytes(b[0..8].try_into().unwrap()),
        phys_length: u32::from_le_bytes(b[8..12].try_into().unwrap()),
        logic_length: u32::from_le_bytes(b[12..16].try_into().unwrap()),
    }
}

pub(crate) fn write_loc(store: &Path, index: u64, loc: RecordLoc) {
    let mut b = Vec::with_capacity(LOC_LEN as usize);
    b.extend_from_slice(&loc.offset.to_le_bytes());
    b.extend_from_slice(&loc.phys_length.to_le_bytes());
    b.extend_from_slice(&loc.logic_length.to_le_bytes());
    patch(&meta(store), TABLE_AT + LOC_LEN * index, &b);
}

/// The payload shard that holds record `index`.
pub(crate) fn shard_of(store: &Path, index: u64) -> usize {
    (index % u64::from(header_u8(store, SHARDS_AT))) as usize
}

/// `logical` encoded with the store's codec, as one zstd frame that declares
/// its content size (as loaderx writes them) or, with `declare_size` false,
/// one that does not.
pub(crate) fn encode(store: &Path, logical: &[u8], declare_size: bool) -> Vec<u8> {
    let mut compressor = match header_u8(store, CODEC_AT) {
        0 => return logical.to_vec(),
        1 => zstd::bulk::Compressor::new(3).unwrap(),
        2 => zstd::bulk::Compressor::with_dictionary(3, &fs::read(store.join(DICT)).unwrap())
            .unwrap(),
        tag => panic!("unknown codec tag {tag}"),
    };
    compressor
        .set_parameter(zstd::zstd_safe::CParameter::ContentSizeFlag(declare_size))
        .unwrap();
    compressor.compress(logical).unwrap()
}

/// Appends `stored` at the tail of record `index`'s shard and points the
/// record at it, with logical length `logic_length`; returns the new location.
pub(crate) fn replace_stored(
    store: &Path,
    index: u64,
    stored: &[u8],
    logic_length: u32,
) -> RecordLoc {
    let shard = shard_of(store, index);
    let offset = tail(store, shard);
    assert_eq!(fs::metadata(data(store, shard)).unwrap().len(), offset);
    patch(&data(store, shard), offset, stored);
    set_tail(store, shard, offset + stored.len() as u64);
    let loc = RecordLoc {
        offset,
        phys_length: stored.len().try_into().unwrap(),
        logic_length,
    };
    write_loc(store, index, loc);
    loc
}

/// Stores `logical` as the new payload of record `index`, encoded with the
/// store's codec. The store stays structurally valid, so only the content of
/// `logical` decides what a reader makes of it.
pub(crate) fn replace_record(store: &Path, index: u64, logical: &[u8]) {
    let stored = encode(store, logical, true);
    replace_stored(store, index, &stored, logical.len().try_into().unwrap());
}

/// A Ragged record's logical bytes: little-endian u64 dims, then elements.
pub(crate) fn ragged_payload(dims: &[u64], elements: &[u8]) -> Vec<u8> {
    let mut out: Vec<u8> = dims.iter().flat_map(|d| d.to_le_bytes()).collect();
    out.extend_from_slice(elements);
    out
}

pub(crate) fn u16_bytes(values: &[u16]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

// ---------------------------------------------------------------------------
// Record contents: a pure function of the record index.
// ---------------------------------------------------------------------------

pub(crate) fn dense_value(i: u64, j: usize) -> u32 {
    (i as u32).wrapping_mul(0x9E37_79B9) ^ (j as u32 * 7 + 1)
}

pub(crate) fn dense_batch(records: std::ops::Range<u64>, width: usize) -> Array2<u32> {
    let start = records.start;
    let n = (records.end - start) as usize;
    Array2::from_shape_fn((n, width), |(i, j)| dense_value(start + i as u64, j))
}

pub(crate) fn ragged_len(i: u64) -> usize {
    1 + (i as usize * 5) % 11
}

pub(crate) fn ragged_record(i: u64) -> Vec<u16> {
    (0..ragged_len(i))
        .map(|j| (i as u16).wrapping_mul(31).wrapping_add(j as u16))
        .collect()
}

/// A raw-content zstd dictionary: zstd accepts any bytes as one.
pub(crate) fn test_dict() -> Vec<u8> {
    (0..2048u32).map(|k| (k * 7 % 251) as u8).collect()
}

/// Options for the fixtures: the 2.4.6 generation, whose layout the
/// constants above write out (`u64` Ragged dims, MsgPack schema), whatever
/// the crate's default.
pub(crate) fn options(codec: Codec, shards: usize) -> CreateOptions {
    let o = CreateOptions::new(codec)
        .data_shards(shards)
        .generation(loaderx_core::Generation::V2_4_6);
    if codec == Codec::ZstdDict {
        o.dict_bytes(test_dict())
    } else {
        o
    }
}

/// The header tag of `codec`.
pub(crate) fn codec_tag(codec: Codec) -> u8 {
    match codec {
        Codec::Raw => 0,
        Codec::Zstd => 1,
        Codec::ZstdDict => 2,
    }
}

// ---------------------------------------------------------------------------
// Fixtures: small valid stores, and damaged copies of them.
// ---------------------------------------------------------------------------

pub(crate) const CODECS: [Codec; 3] = [Codec::Raw, Codec::Zstd, Codec::ZstdDict];
/// Records in every fixture store.
pub(crate) const RECORDS: u64 = 24;
/// Payload shards of every fixture store.
pub(crate) const SHARDS: usize = 3;
/// u32 elements per Dense fixture record.
pub(crate) const WIDTH: usize = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `Dense<u32>`, item shape `[WIDTH]`.
    Dense,
    /// `Ragged<u16>`, rank 1, record `i` is `ragged_record(i)`.
    Ragged,
}

pub(crate) const KINDS: [Kind; 2] = [Kind::Dense, Kind::Ragged];

pub(crate) fn build_dense(path: &Path, codec: Codec, records: u64, width: usize, shards: usize) {
    let mut w = DenseWriter::<u32>::create_with(path, &[width], &options(codec, shards)).unwrap();
    // Two appends, so the table is written in more than one window.
    let half = records / 2;
    w.append(&dense_batch(0..half, width)).unwrap();
    w.append(&dense_batch(half..records, width)).unwrap();
    w.close().unwrap();
}

pub(crate) fn build_ragged(path: &Path, codec: Codec, records: u64, shards: usize) {
    let mut w = RaggedWriter::<u16>::create_with(path, 1, &options(codec, shards)).unwrap();
    let recs: Vec<Vec<u16>> = (0..records).map(ragged_record).collect();
    let half = (records / 2) as usize;
    w.append(&recs[..half]).unwrap();
    w.append(&recs[half..]).unwrap();
    w.close().unwrap();
}

/// A pristine fixture store and a place to put damaged copies of it.
pub(crate) struct Fixture {
    pub(crate) dir: TempDir,
    pub(crate) pristine: PathBuf,
    pub(crate) kind: Kind,
    pub(crate) codec: Codec,
    pub(crate) copies: Cell<usize>,
}

impl Fixture {
    pub(crate) fn new(kind: Kind, codec: Codec) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let pristine = dir.path().join("pristine");
        match kind {
            Kind::Dense => build_dense(&pristine, codec, RECORDS, WIDTH, SHARDS),
            Kind::Ragged => build_ragged(&pristine, codec, RECORDS, SHARDS),
        }
        Fixture {
            dir,
            pristine,
            kind,
            codec,
            copies: Cell::new(0),
        }
    }

    /// Every contract with every codec.
    pub(crate) fn all() -> Vec<Fixture> {
        KINDS
            .iter()
            .flat_map(|&k| CODECS.iter().map(move |&c| Fixture::new(k, c)))
            .collect()
    }

    /// A fresh copy of the pristine store, after `damage` has been applied to it.
    pub(crate) fn damaged(&self, damage: impl FnOnce(&Path)) -> PathBuf {
        let n = self.copies.get();
        self.copies.set(n + 1);
        let copy = self.dir.path().join(format!("copy_{n}"));
        copy_store(&self.pristine, &copy);
        damage(&copy);
        copy
    }

    pub(crate) fn label(&self) -> String {
        format!("{:?}/{}", self.kind, self.codec)
    }
}

pub(crate) fn copy_store(from: &Path, to: &Path) {
    fs::create_dir(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// Records at `indices`, read through the typed reader of `kind`, widened to u64.
pub(crate) fn read_records(
    path: &Path,
    kind: Kind,
    indices: &[u64],
) -> Result<Vec<Vec<u64>>, Error> {
    Ok(match kind {
        Kind::Dense => {
            let batch = Dense::<u32>::open(path)?.gather(indices)?;
            batch
                .outer_iter()
                .map(|row| row.iter().map(|&v| u64::from(v)).collect())
                .collect()
        }
        Kind::Ragged => {
            let batch = Ragged::<u16>::open(path)?.gather(indices)?;
            (0..batch.len())
                .map(|k| batch.data(k).iter().map(|&v| u64::from(v)).collect())
                .collect()
        }
    })
}

/// What [`read_records`] returns for an undamaged fixture.
pub(crate) fn expected_records(kind: Kind, indices: &[u64]) -> Vec<Vec<u64>> {
    indices
        .iter()
        .map(|&i| match kind {
            Kind::Dense => (0..WIDTH).map(|j| u64::from(dense_value(i, j))).collect(),
            Kind::Ragged => ragged_record(i).into_iter().map(u64::from).collect(),
        })
        .collect()
}

/// Opens `path` with `Store::open` and digests every record.
pub(crate) fn open_and_digest(path: &Path) -> Result<loaderx_core::StoreDigest, Error> {
    digest(&Store::open(path)?)
}

/// Asserts that `result` is an error whose kind matches `pattern`.
#[allow(unused_macros)]
macro_rules! assert_err {
    ($result:expr, $pattern:pat $(if $guard:expr)? $(,)?) => {
        assert_err!($result, $pattern $(if $guard)?, "")
    };
    ($result:expr, $pattern:pat $(if $guard:expr)?, $($context:tt)+) => {
        match $result {
            Ok(_) => panic!(
                "expected {} but the call succeeded {}",
                stringify!($pattern $(if $guard)?),
                format_args!($($context)+)
            ),
            Err(e) => assert!(
                matches!(e.kind(), $pattern $(if $guard)?),
                "expected {}, got {:?} {}",
                stringify!($pattern $(if $guard)?),
                e,
                format_args!($($context)+)
            ),
        }
    };
}
#[allow(unused_imports)]
pub(crate) use assert_err;

pub(crate) const CHILD_STORE_ENV: &str = "LOADERX_CHILD_STORE";
pub(crate) const APPENDED: &str = "appended";
pub(crate) const DIGEST_PREFIX: &str = "child digest: ";
pub(crate) const CHILD_TIMEOUT: Duration = Duration::from_secs(60);

/// This test binary re-executed to run one `#[ignore]`d child test on `store`.
pub(crate) struct ChildTest {
    pub(crate) child: Child,
    pub(crate) lines: mpsc::Receiver<String>,
    pub(crate) stderr: Option<JoinHandle<String>>,
}

impl ChildTest {
    pub(crate) fn spawn(test: &str, store: &Path) -> ChildTest {
        Self::spawn_with(test, store, String::new())
    }

    /// As `spawn`, with `config` in the child's `LOADERX_CRASH_CONFIG`.
    pub(crate) fn spawn_with(test: &str, store: &Path, config: String) -> ChildTest {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", test, "--nocapture", "--ignored"])
            .env(CHILD_STORE_ENV, store)
            .env(CRASH_CONFIG_ENV, config)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Both pipes are drained to the end, so the child never blocks on them.
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let _ = tx.send(line);
            }
        });
        let mut stderr = child.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s);
            s
        });
        ChildTest {
            child,
            lines,
            stderr: Some(stderr),
        }
    }

    /// The first stdout line that contains `marker`, or `None` at exit or timeout.
    pub(crate) fn wait_for(&self, marker: &str) -> Option<String> {
        let deadline = Instant::now() + CHILD_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(marker) => return Some(line),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
    }

    /// Kills the child (SIGKILL) and reaps it.
    pub(crate) fn kill(&mut self) -> ExitStatus {
        self.child.kill().unwrap();
        self.child.wait().unwrap()
    }

    /// Waits for the child to exit (killing it after the timeout).
    pub(crate) fn wait(&mut self) -> ExitStatus {
        let deadline = Instant::now() + CHILD_TIMEOUT;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.kill();
        panic!(
            "child did not exit within {CHILD_TIMEOUT:?}: {}",
            self.stderr()
        );
    }

    /// Everything the child wrote to stderr (call once it has exited).
    pub(crate) fn stderr(&mut self) -> String {
        self.stderr
            .take()
            .map(|h| h.join().unwrap())
            .unwrap_or_default()
    }
}

impl Drop for ChildTest {
    fn drop(&mut self) {
        // A failing parent must not leave its child running.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub(crate) const CRASH_CONFIG_ENV: &str = "LOADERX_CRASH_CONFIG";

pub(crate) fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// A random index list of 1 to `max_len` indices below `n`, repeats allowed.
pub(crate) fn random_indices(state: &mut u64, n: u64, max_len: u64) -> Vec<u64> {
    let len = 1 + xorshift(state) % max_len;
    (0..len).map(|_| xorshift(state) % n).collect()
}
