//! Robustness: damaged and hostile stores, bad API input, locking, crash
//! safety and concurrent readers.
//!
//! Every corruption case builds a small valid store in a temporary directory,
//! damages a copy of it byte by byte (the offsets below are the documented
//! on-disk layout, written out here rather than taken from the crate so the
//! tests check the format independently), and asserts the exact
//! [`ErrorKind`] the library returns. Nothing may panic, hang or allocate
//! what a header merely claims.
//!
//! Two tests re-execute this test binary as a child process (a writer that is
//! SIGKILLed mid-build, and a second reader); the children are ordinary
//! `#[ignore]`d tests that do nothing unless `LOADERX_CHILD_STORE` is set.

#![allow(clippy::unwrap_used)]

use std::cell::Cell;
use std::fs::{self, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use loaderx_core::DigestBuilder;
use loaderx_core::format::RecordLoc;
use loaderx_core::ndarray::{Array1, Array2, Array3};
use loaderx_core::{
    Codec, CreateOptions, DType, Dense, DenseWriter, DynDense, DynRagged, DynRaggedWriter, Error,
    ErrorKind, Ragged, RaggedWriter, Store, StoreKind, digest,
};
use proptest::prelude::*;
use tempfile::TempDir;

// ---------------------------------------------------------------------------
// The on-disk layout (see `loaderx_core::format`).
// ---------------------------------------------------------------------------

const META: &str = "meta.zr";
const DICT: &str = "dict.zr";
/// u64 record count.
const LENGTH_AT: u64 = 0;
/// u16 schema length.
const SCHEMA_LENGTH_AT: u64 = 8;
/// u8 shard count.
const SHARDS_AT: u64 = 10;
/// u8 codec tag.
const CODEC_AT: u64 = 11;
/// Four reserved bytes.
const RESERVED_AT: u64 = 12;
/// 255 u64 shard tails.
const TAILS_AT: u64 = 16;
/// MsgPack schema.
const SCHEMA_AT: u64 = 2056;
/// The RecordLoc table.
const TABLE_AT: u64 = 4096;
const LOC_LEN: u64 = 16;

fn meta(store: &Path) -> PathBuf {
    store.join(META)
}

fn data(store: &Path, shard: usize) -> PathBuf {
    store.join(format!("data_{shard}.zr"))
}

fn read_bytes(file: &Path, at: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    fs::File::open(file)
        .unwrap()
        .read_exact_at(&mut buf, at)
        .unwrap();
    buf
}

/// Overwrites `bytes` at `at` in `file` (extending it if needed).
fn patch(file: &Path, at: u64, bytes: &[u8]) {
    OpenOptions::new()
        .write(true)
        .open(file)
        .unwrap()
        .write_all_at(bytes, at)
        .unwrap();
}

fn truncate(file: &Path, len: u64) {
    OpenOptions::new()
        .write(true)
        .open(file)
        .unwrap()
        .set_len(len)
        .unwrap();
}

fn flip_byte(file: &Path, at: u64, xor: u8) {
    let b = read_bytes(file, at, 1)[0];
    patch(file, at, &[b ^ xor]);
}

fn header_u8(store: &Path, at: u64) -> u8 {
    read_bytes(&meta(store), at, 1)[0]
}

fn set_length(store: &Path, length: u64) {
    patch(&meta(store), LENGTH_AT, &length.to_le_bytes());
}

fn tail(store: &Path, shard: usize) -> u64 {
    let b = read_bytes(&meta(store), TAILS_AT + 8 * shard as u64, 8);
    u64::from_le_bytes(b.try_into().unwrap())
}

fn set_tail(store: &Path, shard: usize, tail: u64) {
    patch(
        &meta(store),
        TAILS_AT + 8 * shard as u64,
        &tail.to_le_bytes(),
    );
}

fn set_schema(store: &Path, schema: &[u8]) {
    let len = u16::try_from(schema.len()).unwrap();
    patch(&meta(store), SCHEMA_LENGTH_AT, &len.to_le_bytes());
    patch(&meta(store), SCHEMA_AT, schema);
}

fn read_loc(store: &Path, index: u64) -> RecordLoc {
    let b = read_bytes(&meta(store), TABLE_AT + LOC_LEN * index, LOC_LEN as usize);
    RecordLoc {
        offset: u64::from_le_bytes(b[0..8].try_into().unwrap()),
        phys_length: u32::from_le_bytes(b[8..12].try_into().unwrap()),
        logic_length: u32::from_le_bytes(b[12..16].try_into().unwrap()),
    }
}

fn write_loc(store: &Path, index: u64, loc: RecordLoc) {
    let mut b = Vec::with_capacity(LOC_LEN as usize);
    b.extend_from_slice(&loc.offset.to_le_bytes());
    b.extend_from_slice(&loc.phys_length.to_le_bytes());
    b.extend_from_slice(&loc.logic_length.to_le_bytes());
    patch(&meta(store), TABLE_AT + LOC_LEN * index, &b);
}

/// The payload shard that holds record `index`.
fn shard_of(store: &Path, index: u64) -> usize {
    (index % u64::from(header_u8(store, SHARDS_AT))) as usize
}

/// `logical` encoded with the store's codec, as one zstd frame that declares
/// its content size (as loaderx writes them) or, with `declare_size` false,
/// one that does not.
fn encode(store: &Path, logical: &[u8], declare_size: bool) -> Vec<u8> {
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
fn replace_stored(store: &Path, index: u64, stored: &[u8], logic_length: u32) -> RecordLoc {
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
fn replace_record(store: &Path, index: u64, logical: &[u8]) {
    let stored = encode(store, logical, true);
    replace_stored(store, index, &stored, logical.len().try_into().unwrap());
}

/// A Ragged record's logical bytes: little-endian u64 dims, then elements.
fn ragged_payload(dims: &[u64], elements: &[u8]) -> Vec<u8> {
    let mut out: Vec<u8> = dims.iter().flat_map(|d| d.to_le_bytes()).collect();
    out.extend_from_slice(elements);
    out
}

fn u16_bytes(values: &[u16]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

// ---------------------------------------------------------------------------
// Record contents: a pure function of the record index.
// ---------------------------------------------------------------------------

fn dense_value(i: u64, j: usize) -> u32 {
    (i as u32).wrapping_mul(0x9E37_79B9) ^ (j as u32 * 7 + 1)
}

fn dense_batch(records: std::ops::Range<u64>, width: usize) -> Array2<u32> {
    let start = records.start;
    let n = (records.end - start) as usize;
    Array2::from_shape_fn((n, width), |(i, j)| dense_value(start + i as u64, j))
}

fn ragged_len(i: u64) -> usize {
    1 + (i as usize * 5) % 11
}

fn ragged_record(i: u64) -> Vec<u16> {
    (0..ragged_len(i))
        .map(|j| (i as u16).wrapping_mul(31).wrapping_add(j as u16))
        .collect()
}

/// A raw-content zstd dictionary: zstd accepts any bytes as one.
fn test_dict() -> Vec<u8> {
    (0..2048u32).map(|k| (k * 7 % 251) as u8).collect()
}

fn options(codec: Codec, shards: usize) -> CreateOptions {
    let o = CreateOptions::new(codec).data_shards(shards);
    if codec == Codec::ZstdDict {
        o.dict_bytes(test_dict())
    } else {
        o
    }
}

/// The header tag of `codec`.
fn codec_tag(codec: Codec) -> u8 {
    match codec {
        Codec::Raw => 0,
        Codec::Zstd => 1,
        Codec::ZstdDict => 2,
    }
}

// ---------------------------------------------------------------------------
// Fixtures: small valid stores, and damaged copies of them.
// ---------------------------------------------------------------------------

const CODECS: [Codec; 3] = [Codec::Raw, Codec::Zstd, Codec::ZstdDict];
/// Records in every fixture store.
const RECORDS: u64 = 24;
/// Payload shards of every fixture store.
const SHARDS: usize = 3;
/// u32 elements per Dense fixture record.
const WIDTH: usize = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `Dense<u32>`, item shape `[WIDTH]`.
    Dense,
    /// `Ragged<u16>`, rank 1, record `i` is `ragged_record(i)`.
    Ragged,
}

const KINDS: [Kind; 2] = [Kind::Dense, Kind::Ragged];

fn build_dense(path: &Path, codec: Codec, records: u64, width: usize, shards: usize) {
    let mut w = DenseWriter::<u32>::create_with(path, &[width], &options(codec, shards)).unwrap();
    // Two appends, so the table is written in more than one window.
    let half = records / 2;
    w.append(&dense_batch(0..half, width)).unwrap();
    w.append(&dense_batch(half..records, width)).unwrap();
    w.close().unwrap();
}

fn build_ragged(path: &Path, codec: Codec, records: u64, shards: usize) {
    let mut w = RaggedWriter::<u16>::create_with(path, 1, &options(codec, shards)).unwrap();
    let recs: Vec<Vec<u16>> = (0..records).map(ragged_record).collect();
    let half = (records / 2) as usize;
    w.append(&recs[..half]).unwrap();
    w.append(&recs[half..]).unwrap();
    w.close().unwrap();
}

/// A pristine fixture store and a place to put damaged copies of it.
struct Fixture {
    dir: TempDir,
    pristine: PathBuf,
    kind: Kind,
    codec: Codec,
    copies: Cell<usize>,
}

impl Fixture {
    fn new(kind: Kind, codec: Codec) -> Fixture {
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
    fn all() -> Vec<Fixture> {
        KINDS
            .iter()
            .flat_map(|&k| CODECS.iter().map(move |&c| Fixture::new(k, c)))
            .collect()
    }

    /// A fresh copy of the pristine store, after `damage` has been applied to it.
    fn damaged(&self, damage: impl FnOnce(&Path)) -> PathBuf {
        let n = self.copies.get();
        self.copies.set(n + 1);
        let copy = self.dir.path().join(format!("copy_{n}"));
        copy_store(&self.pristine, &copy);
        damage(&copy);
        copy
    }

    fn label(&self) -> String {
        format!("{:?}/{}", self.kind, self.codec)
    }
}

fn copy_store(from: &Path, to: &Path) {
    fs::create_dir(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// Records at `indices`, read through the typed reader of `kind`, widened to u64.
fn read_records(path: &Path, kind: Kind, indices: &[u64]) -> Result<Vec<Vec<u64>>, Error> {
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
fn expected_records(kind: Kind, indices: &[u64]) -> Vec<Vec<u64>> {
    indices
        .iter()
        .map(|&i| match kind {
            Kind::Dense => (0..WIDTH).map(|j| u64::from(dense_value(i, j))).collect(),
            Kind::Ragged => ragged_record(i).into_iter().map(u64::from).collect(),
        })
        .collect()
}

/// Opens `path` with `Store::open` and digests every record.
fn open_and_digest(path: &Path) -> Result<loaderx_core::StoreDigest, Error> {
    digest(&Store::open(path)?)
}

/// Asserts that `result` is an error whose kind matches `pattern`.
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

// ---------------------------------------------------------------------------
// 0. The fixtures are what the corruption tests assume.
// ---------------------------------------------------------------------------

#[test]
fn fixtures_follow_the_documented_layout() {
    for f in Fixture::all() {
        let p = &f.pristine;
        let all: Vec<u64> = (0..RECORDS).collect();
        assert_eq!(
            read_records(p, f.kind, &all).unwrap(),
            expected_records(f.kind, &all),
            "{}",
            f.label()
        );
        let header = read_bytes(&meta(p), 0, 16);
        assert_eq!(
            u64::from_le_bytes(header[0..8].try_into().unwrap()),
            RECORDS
        );
        assert_eq!(usize::from(header[10]), SHARDS);
        assert_eq!(header[11], codec_tag(f.codec));
        assert_eq!(&header[12..16], &[0; 4]);
        for s in 0..255 {
            let expect = if s < SHARDS {
                fs::metadata(data(p, s)).unwrap().len()
            } else {
                0
            };
            assert_eq!(tail(p, s), expect, "{} tail {s}", f.label());
        }
        let schema_len = u16::from_le_bytes(header[8..10].try_into().unwrap());
        let schema: &[u8] = match f.kind {
            Kind::Dense => b"\x83\xa5dtype\xa3<u4\xa4ndim\x01\xaaitem_shape\x91\x04",
            Kind::Ragged => b"\x82\xa5dtype\xa3<u2\xa4ndim\x01",
        };
        assert_eq!(read_bytes(&meta(p), SCHEMA_AT, schema_len.into()), schema);
        assert_eq!(
            fs::metadata(meta(p)).unwrap().len(),
            TABLE_AT + LOC_LEN * RECORDS
        );
        assert_eq!(p.join(DICT).exists(), f.codec == Codec::ZstdDict);
        // Records are striped by id and packed in order within their shard.
        let mut next = [0u64; SHARDS];
        for i in 0..RECORDS {
            let loc = read_loc(p, i);
            let s = shard_of(p, i);
            assert_eq!(loc.offset, next[s], "{} record {i}", f.label());
            next[s] += u64::from(loc.phys_length);
            let logical = match f.kind {
                Kind::Dense => 4 * WIDTH,
                Kind::Ragged => 8 + 2 * ragged_len(i),
            };
            assert_eq!(loc.logic_length as usize, logical);
            if f.codec == Codec::Raw {
                assert_eq!(loc.phys_length, loc.logic_length);
            } else {
                let frame = read_bytes(&data(p, s), loc.offset, 4);
                assert_eq!(frame, [0x28, 0xb5, 0x2f, 0xfd], "zstd frame magic");
            }
        }
        assert_eq!(
            next.to_vec(),
            (0..SHARDS).map(|s| tail(p, s)).collect::<Vec<_>>()
        );
    }
}

// ---------------------------------------------------------------------------
// 1. Corruption and bad input on disk.
// ---------------------------------------------------------------------------

#[test]
fn missing_store_or_meta_is_not_a_store() {
    let f = Fixture::new(Kind::Dense, Codec::Raw);
    let missing = f.dir.path().join("no_such_store");
    assert_err!(Store::open(&missing), ErrorKind::NotAStore { path } if *path == missing);
    assert_err!(Dense::<u32>::open(&missing), ErrorKind::NotAStore { .. });
    assert_err!(DynRagged::open(&missing), ErrorKind::NotAStore { .. });

    let no_meta = f.damaged(|p| fs::remove_file(meta(p)).unwrap());
    assert_err!(Store::open(&no_meta), ErrorKind::NotAStore { .. });

    let empty_dir = f.dir.path().join("empty_dir");
    fs::create_dir(&empty_dir).unwrap();
    assert_err!(Store::open(&empty_dir), ErrorKind::NotAStore { .. });
}

#[test]
fn truncated_or_zeroed_meta() {
    for f in Fixture::all() {
        let l = f.label();
        let empty = f.damaged(|p| truncate(&meta(p), 0));
        assert_err!(Store::open(&empty), ErrorKind::NotPublished { .. }, "{l}");

        for len in [1, 16, 100, 2056, 4095] {
            let short = f.damaged(|p| truncate(&meta(p), len));
            assert_err!(
                Store::open(&short),
                ErrorKind::Corrupt { .. },
                "{l} len {len}"
            );
        }

        // Cutting into the location table: the header claims more than it holds.
        let cut = f.damaged(|p| truncate(&meta(p), TABLE_AT + LOC_LEN * RECORDS - 1));
        assert_err!(Store::open(&cut), ErrorKind::Corrupt { .. }, "{l}");

        let zero_header = f.damaged(|p| patch(&meta(p), 0, &[0; 16]));
        assert_err!(
            Store::open(&zero_header),
            ErrorKind::NotPublished { .. },
            "{l}"
        );
        assert_err!(DynDense::open(&zero_header), ErrorKind::NotPublished { .. });
        assert_err!(
            DynRagged::open(&zero_header),
            ErrorKind::NotPublished { .. }
        );
    }
}

/// Damage done to a copy of a store.
type Damage<'a> = &'a dyn Fn(&Path);

#[test]
fn bad_header_fields_are_corrupt() {
    let cases: [(&str, Damage<'_>); 16] = [
        ("schema_length 0", &|p| {
            patch(&meta(p), SCHEMA_LENGTH_AT, &0u16.to_le_bytes())
        }),
        ("schema_length 2041", &|p| {
            patch(&meta(p), SCHEMA_LENGTH_AT, &2041u16.to_le_bytes())
        }),
        ("schema_length u16::MAX", &|p| {
            patch(&meta(p), SCHEMA_LENGTH_AT, &u16::MAX.to_le_bytes())
        }),
        ("data_shards 0", &|p| patch(&meta(p), SHARDS_AT, &[0])),
        ("data_shards one fewer", &|p| {
            patch(&meta(p), SHARDS_AT, &[SHARDS as u8 - 1])
        }),
        ("data_shards one more", &|p| {
            patch(&meta(p), SHARDS_AT, &[SHARDS as u8 + 1])
        }),
        ("codec tag 3", &|p| patch(&meta(p), CODEC_AT, &[3])),
        ("codec tag 255", &|p| patch(&meta(p), CODEC_AT, &[255])),
        ("reserved byte 0", &|p| patch(&meta(p), RESERVED_AT, &[1])),
        ("reserved byte 3", &|p| {
            patch(&meta(p), RESERVED_AT + 3, &[0x80])
        }),
        ("unused tail slot", &|p| set_tail(p, SHARDS, 1)),
        ("last unused tail slot", &|p| set_tail(p, 254, 1 << 40)),
        ("length 2^62", &|p| set_length(p, 1 << 62)),
        ("length u64::MAX", &|p| set_length(p, u64::MAX)),
        ("length 2^59 (no overflow)", &|p| set_length(p, 1 << 59)),
        ("length one past the table", &|p| set_length(p, RECORDS + 1)),
    ];
    for f in Fixture::all() {
        for (name, damage) in cases {
            let p = f.damaged(damage);
            let started = Instant::now();
            let result = Store::open(&p);
            let took = started.elapsed();
            assert_err!(result, ErrorKind::Corrupt { .. }, "{} {name}", f.label());
            assert!(took < Duration::from_secs(2), "{name}: open took {took:?}");
            match f.kind {
                Kind::Dense => assert_err!(Dense::<u32>::open(&p), ErrorKind::Corrupt { .. }),
                Kind::Ragged => assert_err!(Ragged::<u16>::open(&p), ErrorKind::Corrupt { .. }),
            }
        }
    }
}

#[test]
fn missing_or_short_payload_shard_is_corrupt() {
    for f in Fixture::all() {
        for shard in 0..SHARDS {
            let short = f.damaged(|p| truncate(&data(p, shard), tail(p, shard) - 1));
            assert_err!(
                Store::open(&short),
                ErrorKind::Corrupt { path, .. } if *path == data(&short, shard),
                "{} shard {shard}", f.label()
            );
            let gone = f.damaged(|p| fs::remove_file(data(p, shard)).unwrap());
            assert_err!(
                Store::open(&gone),
                ErrorKind::Corrupt { .. },
                "{}",
                f.label()
            );
        }
        // Bytes past a shard's committed tail are ignored.
        let longer = f.damaged(|p| patch(&data(p, 0), tail(p, 0), b"junk after the tail"));
        let all: Vec<u64> = (0..RECORDS).collect();
        assert_eq!(
            read_records(&longer, f.kind, &all).unwrap(),
            expected_records(f.kind, &all)
        );
    }
}

#[test]
fn bad_schemas_are_corrupt() {
    let dense = Fixture::new(Kind::Dense, Codec::Zstd);
    let ragged = Fixture::new(Kind::Ragged, Codec::Raw);
    let cases: [(&Fixture, &str, &[u8]); 14] = [
        (&dense, "garbage", &[0xc1; 12]),
        (&dense, "not a map", b"\x92\x01\x02"),
        (&dense, "truncated map", b"\x83\xa5dtype\xa3<u4\xa4ndim"),
        (
            &dense,
            "extra key",
            b"\x84\xa5dtype\xa3<u4\xa4ndim\x01\xaaitem_shape\x91\x04\xa1x\x01",
        ),
        (
            &dense,
            "missing ndim",
            b"\x82\xa5dtype\xa3<u4\xaaitem_shape\x91\x04",
        ),
        (
            &dense,
            "missing dtype",
            b"\x82\xa4ndim\x01\xaaitem_shape\x91\x04",
        ),
        (
            &dense,
            "ndim does not match item_shape",
            b"\x83\xa5dtype\xa3<u4\xa4ndim\x02\xaaitem_shape\x91\x04",
        ),
        (
            &dense,
            "zero-size item",
            b"\x83\xa5dtype\xa3<u4\xa4ndim\x01\xaaitem_shape\x91\x00",
        ),
        (
            &dense,
            "trailing byte",
            b"\x83\xa5dtype\xa3<u4\xa4ndim\x01\xaaitem_shape\x91\x04\x00",
        ),
        (
            &dense,
            "dtype not a string",
            b"\x82\xa5dtype\x04\xa4ndim\x01",
        ),
        (
            &ragged,
            "ragged ndim 0",
            b"\x82\xa5dtype\xa3<u2\xa4ndim\x00",
        ),
        (
            &ragged,
            "ragged ndim 65",
            b"\x82\xa5dtype\xa3<u2\xa4ndim\x41",
        ),
        (&ragged, "ragged missing dtype", b"\x81\xa4ndim\x01"),
        (
            &ragged,
            "negative ndim",
            b"\x82\xa5dtype\xa3<u2\xa4ndim\xff",
        ),
    ];
    for (f, name, schema) in cases {
        let p = f.damaged(|p| set_schema(p, schema));
        assert_err!(Store::open(&p), ErrorKind::Corrupt { .. }, "{name}");
    }
    // Dropping the last byte of a valid schema through schema_length alone.
    let p = dense.damaged(|p| {
        let len = u16::from_le_bytes(
            read_bytes(&meta(p), SCHEMA_LENGTH_AT, 2)
                .try_into()
                .unwrap(),
        );
        patch(&meta(p), SCHEMA_LENGTH_AT, &(len - 1).to_le_bytes());
    });
    assert_err!(Store::open(&p), ErrorKind::Corrupt { .. });

    // Element types loaderx does not support: a Corrupt store whose detail names the type.
    for (f, schema, dtype) in [
        (
            &dense,
            &b"\x83\xa5dtype\xa3>i4\xa4ndim\x01\xaaitem_shape\x91\x04"[..],
            ">i4",
        ),
        (
            &dense,
            b"\x83\xa5dtype\xa3<c8\xa4ndim\x01\xaaitem_shape\x91\x04",
            "<c8",
        ),
        (&ragged, b"\x82\xa5dtype\xa3|O8\xa4ndim\x01", "|O8"),
    ] {
        let p = f.damaged(|p| set_schema(p, schema));
        assert_err!(
            Store::open(&p),
            ErrorKind::Corrupt { detail, .. } if detail.contains(dtype),
            "{dtype}"
        );
    }
}

#[test]
fn dictionary_file_must_match_the_codec() {
    let dict_store = Fixture::new(Kind::Dense, Codec::ZstdDict);
    let gone = dict_store.damaged(|p| fs::remove_file(p.join(DICT)).unwrap());
    assert_err!(Store::open(&gone), ErrorKind::Corrupt { .. });
    let empty = dict_store.damaged(|p| truncate(&p.join(DICT), 0));
    assert_err!(Store::open(&empty), ErrorKind::Corrupt { .. });

    for codec in [Codec::Raw, Codec::Zstd] {
        let f = Fixture::new(Kind::Ragged, codec);
        let extra = f.damaged(|p| fs::write(p.join(DICT), test_dict()).unwrap());
        assert_err!(Store::open(&extra), ErrorKind::Corrupt { .. }, "{codec}");
    }
}

/// Turns a record's location, given its shard's tail, into a damaged one.
type LocDamage = fn(RecordLoc, u64) -> RecordLoc;

/// Ways to damage one record's location, given the location and its shard's tail.
const LOC_DAMAGE: [(&str, LocDamage); 11] = [
    ("offset at the shard tail", |l, t| RecordLoc {
        offset: t,
        ..l
    }),
    ("payload straddles the tail", |l, t| RecordLoc {
        offset: t + 1 - u64::from(l.phys_length),
        ..l
    }),
    ("offset + length overflows", |l, _| RecordLoc {
        offset: u64::MAX - 1,
        ..l
    }),
    ("phys_length 0", |l, _| RecordLoc {
        phys_length: 0,
        ..l
    }),
    ("phys_length u32::MAX", |l, _| RecordLoc {
        phys_length: u32::MAX,
        ..l
    }),
    ("phys_length one short", |l, _| RecordLoc {
        phys_length: l.phys_length - 1,
        ..l
    }),
    ("logic_length 0", |l, _| RecordLoc {
        logic_length: 0,
        ..l
    }),
    ("logic_length over 2 GiB", |l, _| RecordLoc {
        logic_length: u32::MAX,
        ..l
    }),
    ("logic_length one more", |l, _| RecordLoc {
        logic_length: l.logic_length + 1,
        ..l
    }),
    ("logic_length one less", |l, _| RecordLoc {
        logic_length: l.logic_length - 1,
        ..l
    }),
    ("logic_length 3", |l, _| RecordLoc {
        logic_length: 3,
        ..l
    }),
];

#[test]
fn bad_record_locations_are_corrupt_records() {
    const BAD: u64 = 7;
    for f in Fixture::all() {
        for (name, damage) in LOC_DAMAGE {
            let p = f.damaged(|p| {
                let t = tail(p, shard_of(p, BAD));
                write_loc(p, BAD, damage(read_loc(p, BAD), t));
            });
            let l = format!("{} {name}", f.label());
            // The store opens: locations are checked when read.
            assert_err!(
                read_records(&p, f.kind, &[0, BAD, 1]),
                ErrorKind::CorruptRecord { index: BAD, .. },
                "{l}"
            );
            assert_err!(
                open_and_digest(&p),
                ErrorKind::CorruptRecord { index: BAD, .. },
                "{l}"
            );
            // Every other record still reads.
            let others: Vec<u64> = (0..RECORDS).filter(|&i| i != BAD).collect();
            assert_eq!(
                read_records(&p, f.kind, &others).unwrap(),
                expected_records(f.kind, &others),
                "{l}"
            );
        }
    }
}

#[test]
fn verify_names_the_first_bad_record_of_a_parallel_batch() {
    // Records read in parallel fail in whatever order the workers meet
    // them; the full read (what `loaderx verify` runs) must still report the
    // lowest bad index.
    let dir = tempfile::tempdir().unwrap();
    for kind in KINDS {
        let path = dir.path().join(format!("{kind:?}"));
        match kind {
            Kind::Dense => build_dense(&path, Codec::Zstd, 3000, 16, 3),
            Kind::Ragged => build_ragged(&path, Codec::Zstd, 3000, 3),
        }
        for bad in [2900, 1777, 1200] {
            let t = tail(&path, shard_of(&path, bad));
            let mut loc = read_loc(&path, bad);
            loc.offset = t + 1;
            write_loc(&path, bad, loc);
        }
        let store = Store::open(&path).unwrap();
        assert_err!(
            store.for_each_record(|_, _, _| Ok(())),
            ErrorKind::CorruptRecord { index: 1200, .. },
            "{kind:?}"
        );
        assert_err!(digest(&store), ErrorKind::CorruptRecord { index: 1200, .. });
    }
}

#[test]
fn damaged_zstd_frames() {
    const BAD: u64 = 5;
    for f in Fixture::all().into_iter().filter(|f| f.codec != Codec::Raw) {
        let loc = read_loc(&f.pristine, BAD);
        let shard = shard_of(&f.pristine, BAD);
        // A flipped frame magic is always detected.
        let p = f.damaged(|p| flip_byte(&data(p, shard), loc.offset, 0xff));
        assert_err!(
            read_records(&p, f.kind, &[BAD]),
            ErrorKind::CorruptRecord { index: BAD, .. },
            "{}",
            f.label()
        );
        assert_err!(
            open_and_digest(&p),
            ErrorKind::CorruptRecord { index: BAD, .. }
        );

        // Any other single flipped byte: an error naming the record, or
        // (zstd frames carry no checksum) a successful read; never a panic,
        // and never an effect on another record.
        let p = f.damaged(|_| {});
        for k in 0..u64::from(loc.phys_length) {
            for xor in [0x01, 0x80, 0xff] {
                flip_byte(&data(&p, shard), loc.offset + k, xor);
                match read_records(&p, f.kind, &[BAD - 1, BAD, BAD + 1]) {
                    Ok(recs) => {
                        let expect = expected_records(f.kind, &[BAD - 1, BAD + 1]);
                        assert_eq!([&recs[0], &recs[2]], [&expect[0], &expect[1]]);
                    }
                    Err(e) => assert!(
                        matches!(e.kind(), ErrorKind::CorruptRecord { index: BAD, .. }),
                        "{} byte {k} ^ {xor:#x}: {e:?}",
                        f.label()
                    ),
                }
                flip_byte(&data(&p, shard), loc.offset + k, xor);
            }
        }
        assert_eq!(
            read_records(&p, f.kind, &[BAD]).unwrap(),
            expected_records(f.kind, &[BAD])
        );
    }
}

#[test]
fn ragged_shape_header_must_match_the_payload() {
    const BAD: u64 = 4;
    for codec in CODECS {
        let f = Fixture::new(Kind::Ragged, codec);
        let rec = ragged_record(BAD);
        let n = rec.len() as u64;
        let elements = u16_bytes(&rec);

        // The helper itself: a valid replacement reads back as written.
        let replaced: Vec<u16> = vec![9, 8, 7, 6, 5];
        let p = f.damaged(|p| {
            replace_record(p, BAD, &ragged_payload(&[5], &u16_bytes(&replaced)));
        });
        let got = Ragged::<u16>::open(&p).unwrap().gather(&[BAD]).unwrap();
        assert_eq!(got.data(0), &replaced[..]);

        for dims in [n + 1, n - 1, 0, n * 2, u64::MAX, 1 << 63] {
            let p = f.damaged(|p| replace_record(p, BAD, &ragged_payload(&[dims], &elements)));
            assert_err!(
                read_records(&p, Kind::Ragged, &[0, BAD]),
                ErrorKind::CorruptRecord { index: BAD, .. },
                "{codec} dims {dims}"
            );
            assert_err!(
                DynRagged::open(&p).unwrap().gather(&[BAD]),
                ErrorKind::CorruptRecord { index: BAD, .. }
            );
            assert_err!(
                open_and_digest(&p),
                ErrorKind::CorruptRecord { index: BAD, .. }
            );
        }
        // Element bytes that are not a whole number of u16 elements.
        let p = f.damaged(|p| replace_record(p, BAD, &ragged_payload(&[1], &[1, 2, 3])));
        assert_err!(
            read_records(&p, Kind::Ragged, &[BAD]),
            ErrorKind::CorruptRecord { index: BAD, .. }
        );
    }
}

#[test]
fn ragged_gather_checks_logical_lengths_before_sizing_memory() {
    // 2 GiB, the largest logical length a location may claim: RECORDS of them
    // would be a 48 GiB allocation, which must never be attempted.
    const HUGE: u32 = 1 << 31;
    let all: Vec<u64> = (0..RECORDS).collect();
    for codec in CODECS {
        let f = Fixture::new(Kind::Ragged, codec);
        let p = f.damaged(|p| {
            for i in 0..RECORDS {
                let loc = read_loc(p, i);
                write_loc(
                    p,
                    i,
                    RecordLoc {
                        logic_length: HUGE,
                        ..loc
                    },
                );
            }
        });
        let r = DynRagged::open(&p).unwrap();
        assert_err!(
            r.gather_len(&all),
            ErrorKind::CorruptRecord { index: 0, .. },
            "{codec}"
        );
        assert_err!(
            r.gather(&all),
            ErrorKind::CorruptRecord { index: 0, .. },
            "{codec}"
        );
        assert_err!(
            open_and_digest(&p),
            ErrorKind::CorruptRecord { index: 0, .. }
        );

        if codec == Codec::Raw {
            continue;
        }
        // A zstd frame need not declare its content size: such a record reads ...
        let payload = ragged_payload(&[3], &u16_bytes(&[7, 8, 9]));
        let p = f.damaged(|p| {
            let frame = encode(p, &payload, false);
            assert!(matches!(
                zstd::zstd_safe::get_frame_content_size(&frame),
                Ok(None)
            ));
            replace_stored(p, 0, &frame, payload.len() as u32);
        });
        let got = Ragged::<u16>::open(&p).unwrap().gather(&[0, 1]).unwrap();
        assert_eq!(got.data(0), &[7, 8, 9]);
        assert_eq!(got.data(1), &ragged_record(1)[..]);
        // ... but its few bytes cannot claim 2 GiB, here for every record at once.
        let p = f.damaged(|p| {
            let frame = encode(p, &payload, false);
            let locs: Vec<RecordLoc> = (0..SHARDS as u64)
                .map(|i| replace_stored(p, i, &frame, HUGE))
                .collect();
            for i in 0..RECORDS {
                write_loc(p, i, locs[i as usize % SHARDS]);
            }
        });
        assert_err!(
            DynRagged::open(&p).unwrap().gather(&all),
            ErrorKind::CorruptRecord { index: 0, .. },
            "{codec}"
        );
    }
}

#[test]
fn bool_bytes_other_than_0_and_1_are_rejected() {
    const BAD: u64 = 3;
    let bad_bytes = [0u8, 1, 2, 0, 1, 0, 1, 0];
    for codec in CODECS {
        let dir = tempfile::tempdir().unwrap();

        let dense = dir.path().join("dense");
        let mut w = DenseWriter::<bool>::create_with(&dense, &[8], &options(codec, 2)).unwrap();
        w.append(&Array2::from_shape_fn((6, 8), |(i, j)| (i + j) % 3 == 0))
            .unwrap();
        w.close().unwrap();
        replace_record(&dense, BAD, &bad_bytes);

        let r = Dense::<bool>::open(&dense).unwrap();
        assert!(r.gather(&[0, 2, 4, 5]).is_ok());
        assert_err!(
            r.gather(&[0, BAD]),
            ErrorKind::CorruptRecord { index: BAD, .. },
            "{codec}"
        );
        assert_err!(r.get(BAD), ErrorKind::CorruptRecord { index: BAD, .. });
        let mut out = [false; 8];
        assert_err!(
            r.gather_into(&[BAD], &mut out),
            ErrorKind::CorruptRecord { index: BAD, .. }
        );
        // The untyped reader hands out the stored bytes as they are.
        assert_eq!(r.as_dyn().gather_bytes(&[BAD]).unwrap(), bad_bytes);
        let store = Store::open(&dense).unwrap();
        assert_err!(
            store.for_each_record(|_, _, _| Ok(())),
            ErrorKind::CorruptRecord { index: BAD, .. },
            "{codec}"
        );
        assert_err!(digest(&store), ErrorKind::CorruptRecord { index: BAD, .. });

        let ragged = dir.path().join("ragged");
        let mut w = RaggedWriter::<bool>::create_with(&ragged, 1, &options(codec, 2)).unwrap();
        w.append((0..6).map(|i| vec![i % 2 == 0; i + 1])).unwrap();
        w.close().unwrap();
        replace_record(&ragged, BAD, &ragged_payload(&[8], &bad_bytes));
        let r = Ragged::<bool>::open(&ragged).unwrap();
        assert!(r.gather(&[0, 2, 4, 5]).is_ok());
        assert_err!(
            r.gather(&[0, BAD]),
            ErrorKind::CorruptRecord { index: BAD, .. },
            "{codec}"
        );
        assert_err!(
            Store::open(&ragged)
                .unwrap()
                .for_each_record(|_, _, _| Ok(())),
            ErrorKind::CorruptRecord { index: BAD, .. }
        );
    }
}

/// Where a random byte flip lands.
#[derive(Debug, Clone, Copy)]
enum Region {
    Header,
    UsedTails,
    Schema,
    Table,
    Payload(usize),
}

fn region() -> impl Strategy<Value = Region> {
    prop_oneof![
        Just(Region::Header),
        Just(Region::UsedTails),
        Just(Region::Schema),
        Just(Region::Table),
        (0..SHARDS).prop_map(Region::Payload),
    ]
}

fn region_span(store: &Path, region: Region) -> (PathBuf, u64, u64) {
    match region {
        Region::Header => (meta(store), 0, 16),
        Region::UsedTails => (meta(store), TAILS_AT, 8 * SHARDS as u64),
        Region::Schema => {
            let len = read_bytes(&meta(store), SCHEMA_LENGTH_AT, 2);
            (
                meta(store),
                SCHEMA_AT,
                u64::from(u16::from_le_bytes([len[0], len[1]])),
            )
        }
        Region::Table => (meta(store), TABLE_AT, LOC_LEN * RECORDS),
        Region::Payload(s) => (data(store, s), 0, tail(store, s)),
    }
}

/// Is `e` a kind a damaged store may legitimately produce?
fn is_damage_error(e: &Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::Corrupt { .. }
            | ErrorKind::CorruptRecord { .. }
            | ErrorKind::NotPublished { .. }
            // A flipped schema byte can name another element type or contract.
            | ErrorKind::DTypeMismatch { .. }
            | ErrorKind::KindMismatch { .. }
    )
}

/// A random flipped byte anywhere a reader looks gives a result or a
/// corruption error, never a panic, through every read path.
#[test]
fn random_byte_flips_never_panic() {
    let fixtures = Fixture::all();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let cases = (0..fixtures.len(), region(), any::<u64>(), 1u8..=255);
    runner
        .run(&cases, |(k, region, pos, xor)| {
            let f = &fixtures[k];
            let p = f.damaged(|p| {
                let (file, start, len) = region_span(p, region);
                flip_byte(&file, start + pos % len, xor);
            });
            // A flipped length may shrink the store: read what it claims.
            let len = Store::open(&p).map_or(RECORDS, |s| s.len());
            let all: Vec<u64> = (0..len).collect();
            if let Err(e) = open_and_digest(&p) {
                prop_assert!(is_damage_error(&e), "digest: {e:?}");
            }
            if let Err(e) = read_records(&p, f.kind, &all) {
                prop_assert!(is_damage_error(&e), "typed gather: {e:?}");
            }
            if let Ok(store) = Store::open(&p) {
                let result = match &store {
                    Store::Dense(d) => d.gather_bytes(&all).map(drop),
                    Store::Ragged(r) => r.gather(&all).map(drop),
                };
                for e in [store.logical_bytes().err(), result.err()]
                    .into_iter()
                    .flatten()
                {
                    prop_assert!(is_damage_error(&e), "untyped gather: {e:?}");
                }
            }
            Ok(())
        })
        .unwrap();
}

// ---------------------------------------------------------------------------
// 2. Bad API input.
// ---------------------------------------------------------------------------

#[test]
fn typed_open_checks_dtype_and_contract() {
    let dense = Fixture::new(Kind::Dense, Codec::Raw);
    let ragged = Fixture::new(Kind::Ragged, Codec::Zstd);

    assert_err!(
        Dense::<f32>::open(&dense.pristine),
        ErrorKind::DTypeMismatch {
            expected: DType::F32,
            found: DType::U32,
            ..
        }
    );
    assert_err!(
        Dense::<i32>::open(&dense.pristine),
        ErrorKind::DTypeMismatch { .. }
    );
    assert_err!(
        DynDense::open(&dense.pristine).unwrap().typed::<u8>(),
        ErrorKind::DTypeMismatch { .. }
    );
    assert_err!(
        Ragged::<i16>::open(&ragged.pristine),
        ErrorKind::DTypeMismatch {
            expected: DType::I16,
            found: DType::U16,
            ..
        }
    );

    assert_err!(
        Dense::<u16>::open(&ragged.pristine),
        ErrorKind::KindMismatch {
            expected: StoreKind::Dense,
            found: StoreKind::Ragged,
            ..
        }
    );
    assert_err!(
        DynDense::open(&ragged.pristine),
        ErrorKind::KindMismatch { .. }
    );
    assert_err!(
        Ragged::<u32>::open(&dense.pristine),
        ErrorKind::KindMismatch {
            expected: StoreKind::Ragged,
            found: StoreKind::Dense,
            ..
        }
    );
    assert_err!(
        DynRagged::open(&dense.pristine),
        ErrorKind::KindMismatch { .. }
    );
}

#[test]
fn dense_append_rejects_wrong_shapes_and_empty_batches() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dense");
    let mut w = DenseWriter::<u32>::create_with(&path, &[2, 3], &options(Codec::Zstd, 2)).unwrap();

    let bad_shapes = [
        Array3::<u32>::zeros((4, 3, 2)).into_dyn(),
        Array3::<u32>::zeros((4, 2, 4)).into_dyn(),
        Array2::<u32>::zeros((2, 3)).into_dyn(),
        Array2::<u32>::zeros((4, 6)).into_dyn(),
        Array1::<u32>::zeros(6).into_dyn(),
        loaderx_core::ndarray::arr0(1u32).into_dyn(),
    ];
    for batch in &bad_shapes {
        assert_err!(
            w.append(batch),
            ErrorKind::ShapeMismatch { .. },
            "{:?}",
            batch.shape()
        );
    }
    assert_err!(
        w.append(&Array3::<u32>::zeros((0, 2, 3))),
        ErrorKind::InvalidArgument { .. }
    );
    assert_err!(w.append_slice(&[], 0), ErrorKind::InvalidArgument { .. });
    assert_err!(
        w.append_slice(&[1, 2, 3, 4, 5], 1),
        ErrorKind::InvalidArgument { .. }
    );
    assert_err!(
        w.append_slice(&[0; 12], 1),
        ErrorKind::InvalidArgument { .. }
    );
    assert_eq!(w.len(), 0);

    // Rejected input never poisons the writer.
    let good = Array3::from_shape_fn((5, 2, 3), |(i, a, b)| (i * 6 + a * 3 + b) as u32);
    w.append(&good).unwrap();
    w.close().unwrap();
    let r = Dense::<u32>::open(&path).unwrap();
    assert_eq!(r.len(), 5);
    assert_eq!(r.range(0..5).unwrap(), good.into_dyn());
}

#[test]
fn ragged_append_rejects_wrong_rank_and_empty_records() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ragged");
    let mut w = RaggedWriter::<u16>::create_with(&path, 2, &options(Codec::Raw, 2)).unwrap();

    assert_err!(
        w.append([vec![1u16, 2, 3]]),
        ErrorKind::ShapeMismatch { index: 0, .. }
    );
    let good = Array2::<u16>::ones((2, 3));
    assert_err!(
        w.append([
            good.view().into_dyn(),
            Array1::<u16>::ones(3).view().into_dyn()
        ]),
        ErrorKind::ShapeMismatch { index: 1, .. }
    );
    assert_err!(
        w.append([Array3::<u16>::ones((1, 2, 3))]),
        ErrorKind::ShapeMismatch { index: 0, .. }
    );
    assert_err!(
        w.append([good.clone(), Array2::<u16>::zeros((3, 0))]),
        ErrorKind::InvalidArgument { .. }
    );
    assert_err!(
        w.append(Vec::<Array2<u16>>::new()),
        ErrorKind::InvalidArgument { .. }
    );
    assert_eq!(w.len(), 0, "a rejected batch writes nothing");

    let mut dynw = w.into_dyn();
    let two: &[usize] = &[1, 2];
    assert_err!(
        dynw.append_bytes([(two, &[1u8, 2, 3][..])]),
        ErrorKind::ShapeMismatch { index: 0, .. }
    );
    dynw.append_bytes([(two, &[1u8, 0, 2, 0][..])]).unwrap();
    dynw.close().unwrap();
    let r = Ragged::<u16>::open(&path).unwrap();
    assert_eq!(r.len(), 1);
    assert_eq!(r.gather(&[0]).unwrap().data(0), &[1, 2]);

    // Rank 1: an empty record is refused too.
    let mut w = RaggedWriter::<u16>::create(dir.path().join("r1"), 1, Codec::Zstd).unwrap();
    assert_err!(
        w.append([vec![1u16], vec![]]),
        ErrorKind::InvalidArgument { .. }
    );
}

#[test]
fn gather_rejects_out_of_range_indices_and_wrong_buffers() {
    let dense = Fixture::new(Kind::Dense, Codec::Zstd);
    let ragged = Fixture::new(Kind::Ragged, Codec::ZstdDict);
    let d = Dense::<u32>::open(&dense.pristine).unwrap();
    let r = Ragged::<u16>::open(&ragged.pristine).unwrap();

    for bad in [RECORDS, RECORDS + 1, u64::MAX / 16, u64::MAX] {
        assert_err!(
            d.gather(&[0, bad]),
            ErrorKind::IndexOutOfRange { index, len: RECORDS, .. } if *index == bad
        );
        assert_err!(d.get(bad), ErrorKind::IndexOutOfRange { .. });
        assert_err!(
            d.as_dyn().gather_bytes(&[bad]),
            ErrorKind::IndexOutOfRange { .. }
        );
        assert_err!(
            r.gather(&[bad, 0]),
            ErrorKind::IndexOutOfRange { index, .. } if *index == bad
        );
        assert_err!(
            r.as_dyn().gather_len(&[bad]),
            ErrorKind::IndexOutOfRange { .. }
        );
    }
    assert_err!(d.range(0..RECORDS + 1), ErrorKind::IndexOutOfRange { .. });
    assert!(d.gather(&[]).unwrap().is_empty());

    for len in [0, 2 * WIDTH - 1, 2 * WIDTH + 1, 3 * WIDTH] {
        let mut buf = vec![0u32; len];
        assert_err!(
            d.gather_into(&[0, 1], &mut buf),
            ErrorKind::Buffer { .. },
            "{len}"
        );
    }
    let mut bytes = vec![0u8; 4 * WIDTH + 3];
    assert_err!(
        d.as_dyn().gather_into(&[0], &mut bytes),
        ErrorKind::Buffer { .. }
    );

    let need = r.as_dyn().gather_len(&[1, 2, 3]).unwrap();
    let mut small = vec![0u8; need - 1];
    assert_err!(
        r.as_dyn().gather_into(&[1, 2, 3], &mut small),
        ErrorKind::Buffer { .. }
    );
    let mut exact = vec![0u8; need];
    let layout = r.as_dyn().gather_into(&[1, 2, 3], &mut exact).unwrap();
    assert_eq!(layout.shape(2), &[ragged_len(3)]);
}

#[test]
fn create_refuses_existing_paths() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    build_dense(&store, Codec::Raw, 4, WIDTH, 1);
    let empty_dir = dir.path().join("empty_dir");
    fs::create_dir(&empty_dir).unwrap();
    let file = dir.path().join("file");
    fs::write(&file, b"precious").unwrap();

    for path in [&store, &empty_dir, &file] {
        assert_err!(
            DenseWriter::<u32>::create(path, &[WIDTH], Codec::Zstd),
            ErrorKind::AlreadyExists { path: p } if p == path
        );
        assert_err!(
            RaggedWriter::<u16>::create(path, 1, Codec::Raw),
            ErrorKind::AlreadyExists { .. }
        );
        assert_err!(
            DynRaggedWriter::create(path, DType::F32, 2, &options(Codec::ZstdDict, 3)),
            ErrorKind::AlreadyExists { .. }
        );
    }
    // Nothing was touched.
    assert_eq!(fs::read(&file).unwrap(), b"precious");
    assert_eq!(fs::read_dir(&empty_dir).unwrap().count(), 0);
    assert_eq!(Dense::<u32>::open(&store).unwrap().len(), 4);
}

#[test]
fn create_rejects_bad_options() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("0 shards", CreateOptions::new(Codec::Raw).data_shards(0)),
        (
            "256 shards",
            CreateOptions::new(Codec::Zstd).data_shards(256),
        ),
        (
            "huge shards",
            CreateOptions::new(Codec::Zstd).data_shards(usize::MAX),
        ),
        (
            "zstd_dict without dict",
            CreateOptions::new(Codec::ZstdDict),
        ),
        (
            "zstd_dict with empty dict",
            CreateOptions::new(Codec::ZstdDict).dict_bytes(Vec::new()),
        ),
        (
            "raw with dict",
            CreateOptions::new(Codec::Raw).dict_bytes(test_dict()),
        ),
        (
            "zstd with dict",
            CreateOptions::new(Codec::Zstd).dict_bytes(test_dict()),
        ),
    ];
    for (name, opts) in &cases {
        let path = dir.path().join(name.replace(' ', "_"));
        assert_err!(
            DenseWriter::<u32>::create_with(&path, &[WIDTH], opts),
            ErrorKind::InvalidArgument { .. },
            "{name}"
        );
        assert_err!(
            RaggedWriter::<u8>::create_with(&path, 1, opts),
            ErrorKind::InvalidArgument { .. },
            "{name}"
        );
        assert!(!path.exists(), "{name}: a refused create left {path:?}");
    }
    // Shapes and ranks the format cannot hold.
    let path = dir.path().join("bad_shape");
    assert_err!(
        DenseWriter::<u32>::create(&path, &[4, 0], Codec::Raw),
        ErrorKind::InvalidArgument { .. }
    );
    assert_err!(
        RaggedWriter::<u32>::create(&path, 0, Codec::Raw),
        ErrorKind::InvalidArgument { .. }
    );
    assert_err!(
        RaggedWriter::<u32>::create(&path, 65, Codec::Raw),
        ErrorKind::InvalidArgument { .. }
    );
    assert!(!path.exists());

    // The shard-count bounds themselves are accepted.
    for shards in [1, 255] {
        let path = dir.path().join(format!("shards_{shards}"));
        build_dense(&path, Codec::Zstd, 300, 2, shards);
        let r = Dense::<u32>::open(&path).unwrap();
        assert_eq!(r.as_dyn().data_shards(), shards);
        assert_eq!(
            r.gather(&[299]).unwrap().into_raw_vec_and_offset().0,
            [dense_value(299, 0), dense_value(299, 1)]
        );
    }
}

// ---------------------------------------------------------------------------
// 3. Locking.
// ---------------------------------------------------------------------------

#[test]
fn a_live_writer_makes_its_store_busy() {
    let dir = tempfile::tempdir().unwrap();

    let dense = dir.path().join("dense");
    let mut w =
        DenseWriter::<u32>::create_with(&dense, &[WIDTH], &options(Codec::Zstd, 2)).unwrap();
    assert_err!(Store::open(&dense), ErrorKind::Busy { path } if *path == dense);
    w.append(&dense_batch(0..10, WIDTH)).unwrap();
    assert_err!(Store::open(&dense), ErrorKind::Busy { .. });
    assert_err!(Dense::<u32>::open(&dense), ErrorKind::Busy { .. });
    assert_err!(DynDense::open(&dense), ErrorKind::Busy { .. });
    w.close().unwrap();

    let ragged = dir.path().join("ragged");
    let mut w = RaggedWriter::<u16>::create_with(&ragged, 1, &options(Codec::Raw, 3)).unwrap();
    w.append((0..10).map(ragged_record)).unwrap();
    assert_err!(Ragged::<u16>::open(&ragged), ErrorKind::Busy { .. });
    assert_err!(DynRagged::open(&ragged), ErrorKind::Busy { .. });
    w.close().unwrap();

    // After close, any number of readers at once.
    let a = Store::open(&dense).unwrap();
    let b = Dense::<u32>::open(&dense).unwrap();
    let c = DynDense::open(&dense).unwrap();
    assert_eq!(
        digest(&a).unwrap(),
        digest(&Store::open(&dense).unwrap()).unwrap()
    );
    assert_eq!(
        b.gather(&[9]).unwrap(),
        dense_batch(9..10, WIDTH).into_dyn()
    );
    assert_eq!(c.len(), 10);
    let r1 = Ragged::<u16>::open(&ragged).unwrap();
    let r2 = Ragged::<u16>::open(&ragged).unwrap();
    assert_eq!(
        r1.gather(&[7]).unwrap().data(0),
        r2.gather(&[7]).unwrap().data(0)
    );
}

/// How long the forked child of the next test keeps our descriptors before `exec`.
const FORK_HOLD: Duration = Duration::from_millis(1500);

#[test]
fn a_writer_releases_its_lock_while_a_fork_holds_its_descriptors() {
    use std::os::unix::process::CommandExt;

    let dir = tempfile::tempdir().unwrap();
    let dropped = dir.path().join("dropped");
    let closed = dir.path().join("closed");
    let mut wd =
        DenseWriter::<u32>::create_with(&dropped, &[WIDTH], &options(Codec::Raw, 1)).unwrap();
    let mut wc =
        DenseWriter::<u32>::create_with(&closed, &[WIDTH], &options(Codec::Zstd, 2)).unwrap();
    wd.append(&dense_batch(0..10, WIDTH)).unwrap();
    wc.append(&dense_batch(0..10, WIDTH)).unwrap();

    // A child forked now shares every open file description of this process
    // (the writers' locked meta.zr included) until it execs, as any
    // `Command::spawn` on another thread does for a moment; this one lingers.
    let spawner = std::thread::spawn(|| {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(["--exact", "child_writer_process", "--ignored", "-q"])
            .env_remove(CHILD_STORE_ENV)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: the hook runs in the forked child before exec and only
        // sleeps (nanosleep is async-signal-safe; it takes no lock and does
        // not allocate).
        unsafe {
            cmd.pre_exec(|| {
                std::thread::sleep(FORK_HOLD);
                Ok(())
            });
        }
        cmd.status().unwrap()
    });
    std::thread::sleep(FORK_HOLD / 5);

    // Dropping or closing a writer must release its lock at once all the same.
    drop(wd);
    wc.close().unwrap();
    assert_err!(Store::open(&dropped), ErrorKind::NotPublished { .. });
    assert_eq!(Dense::<u32>::open(&closed).unwrap().len(), 10);
    assert!(spawner.join().unwrap().success());
}

// ---------------------------------------------------------------------------
// 4 and 6. Crash safety: writers that never close.
// ---------------------------------------------------------------------------

#[test]
fn a_dropped_writer_leaves_an_unpublished_store() {
    let dir = tempfile::tempdir().unwrap();
    for codec in CODECS {
        let empty = dir.path().join(format!("dense_empty_{codec}"));
        drop(DenseWriter::<u32>::create_with(&empty, &[WIDTH], &options(codec, 2)).unwrap());
        assert_err!(
            Store::open(&empty),
            ErrorKind::NotPublished { .. },
            "{codec}"
        );

        let dense = dir.path().join(format!("dense_{codec}"));
        let mut w = DenseWriter::<u32>::create_with(&dense, &[WIDTH], &options(codec, 2)).unwrap();
        w.append(&dense_batch(0..50, WIDTH)).unwrap();
        drop(w);
        assert_err!(
            Store::open(&dense),
            ErrorKind::NotPublished { .. },
            "{codec}"
        );
        assert_err!(Dense::<u32>::open(&dense), ErrorKind::NotPublished { .. });

        let ragged = dir.path().join(format!("ragged_{codec}"));
        let mut w = RaggedWriter::<u16>::create_with(&ragged, 1, &options(codec, 3)).unwrap();
        w.append((0..50).map(ragged_record)).unwrap();
        drop(w.into_dyn());
        assert_err!(
            Store::open(&ragged),
            ErrorKind::NotPublished { .. },
            "{codec}"
        );
        assert_err!(Ragged::<u16>::open(&ragged), ErrorKind::NotPublished { .. });
    }
}

const CHILD_STORE_ENV: &str = "LOADERX_CHILD_STORE";
const APPENDED: &str = "appended";
const DIGEST_PREFIX: &str = "child digest: ";
const CHILD_TIMEOUT: Duration = Duration::from_secs(60);

/// This test binary re-executed to run one `#[ignore]`d child test on `store`.
struct ChildTest {
    child: Child,
    lines: mpsc::Receiver<String>,
    stderr: Option<JoinHandle<String>>,
}

impl ChildTest {
    fn spawn(test: &str, store: &Path) -> ChildTest {
        Self::spawn_with(test, store, String::new())
    }

    /// As `spawn`, with `config` in the child's `LOADERX_CRASH_CONFIG`.
    fn spawn_with(test: &str, store: &Path, config: String) -> ChildTest {
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
    fn wait_for(&self, marker: &str) -> Option<String> {
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
    fn kill(&mut self) -> ExitStatus {
        self.child.kill().unwrap();
        self.child.wait().unwrap()
    }

    /// Waits for the child to exit (killing it after the timeout).
    fn wait(&mut self) -> ExitStatus {
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
    fn stderr(&mut self) -> String {
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

#[test]
fn a_killed_writer_leaves_an_unpublished_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("killed");
    let mut child = ChildTest::spawn("child_writer_process", &path);
    if child.wait_for(APPENDED).is_none() {
        let _ = child.kill();
        panic!("the child writer never appended: {}", child.stderr());
    }
    let status = child.kill();
    assert_eq!(
        status.signal(),
        Some(9),
        "child exited otherwise: {status:?}"
    );
    assert!(fs::metadata(meta(&path)).unwrap().len() > TABLE_AT);
    assert_err!(Store::open(&path), ErrorKind::NotPublished { .. });
    assert_err!(Dense::<u32>::open(&path), ErrorKind::NotPublished { .. });
}

/// Child of `a_killed_writer_leaves_an_unpublished_store`: builds a Dense
/// zstd store and appends until killed (30 s at most, in case its parent died).
#[test]
#[ignore = "child process, run by a_killed_writer_leaves_an_unpublished_store"]
fn child_writer_process() {
    let Some(path) = std::env::var_os(CHILD_STORE_ENV) else {
        return;
    };
    let mut w = DenseWriter::<u32>::create_with(&path, &[64], &options(Codec::Zstd, 2)).unwrap();
    let started = Instant::now();
    let mut next = 0;
    while started.elapsed() < Duration::from_secs(30) {
        w.append(&dense_batch(next..next + 256, 64)).unwrap();
        if next == 0 {
            println!("{APPENDED}");
            std::io::stdout().flush().unwrap();
        }
        next += 256;
    }
}

// The kill-point harness: a child process builds a store and is SIGKILLed at
// a random moment; whatever it left behind must either refuse to open with a
// clear error or open with exactly the contents of a completed build.

const CRASH_CONFIG_ENV: &str = "LOADERX_CRASH_CONFIG";
/// Kill points tried by `random_kill_points_never_leave_a_store_that_opens_wrong`.
const KILL_POINTS: usize = 120;
/// Records per crash build, appended in `CRASH_APPENDS` calls.
const CRASH_RECORDS: u64 = 3072;
const CRASH_APPENDS: u64 = 6;

/// One build of the crash harness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CrashBuild {
    kind: Kind,
    codec: Codec,
    shards: usize,
}

impl CrashBuild {
    fn all() -> Vec<CrashBuild> {
        let mut all = Vec::new();
        for kind in KINDS {
            for codec in CODECS {
                for shards in [1, 4] {
                    all.push(CrashBuild {
                        kind,
                        codec,
                        shards,
                    });
                }
            }
        }
        all
    }

    fn to_env(self) -> String {
        format!("{:?},{},{}", self.kind, codec_tag(self.codec), self.shards)
    }

    fn from_env(s: &str) -> CrashBuild {
        let parts: Vec<&str> = s.split(',').collect();
        let kind = if parts[0] == "Dense" {
            Kind::Dense
        } else {
            Kind::Ragged
        };
        let codec = CODECS[parts[1].parse::<usize>().unwrap()];
        CrashBuild {
            kind,
            codec,
            shards: parts[2].parse().unwrap(),
        }
    }

    /// Builds the whole store at `path`, calling `event` after create, after
    /// every append and after close.
    fn build(self, path: &Path, mut event: impl FnMut(&str)) {
        let per = CRASH_RECORDS / CRASH_APPENDS;
        let opts = options(self.codec, self.shards);
        match self.kind {
            Kind::Dense => {
                let mut w = DenseWriter::<u32>::create_with(path, &[64], &opts).unwrap();
                event("created");
                for k in 0..CRASH_APPENDS {
                    w.append(&dense_batch(k * per..(k + 1) * per, 64)).unwrap();
                    event("appended");
                }
                w.close().unwrap();
            }
            Kind::Ragged => {
                let mut w = RaggedWriter::<u16>::create_with(path, 1, &opts).unwrap();
                event("created");
                for k in 0..CRASH_APPENDS {
                    w.append((k * per..(k + 1) * per).map(ragged_record))
                        .unwrap();
                    event("appended");
                }
                w.close().unwrap();
            }
        }
        event("closed");
    }
}

/// What the parent saw of a child before it killed it.
#[derive(Debug, Default)]
struct KillTally {
    before_create: usize,
    during_append: usize,
    during_close: usize,
    after_close: usize,
    refused: usize,
    opened_whole: usize,
}

#[test]
fn random_kill_points_never_leave_a_store_that_opens_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let builds = CrashBuild::all();

    // A published neighbour that every crash must leave untouched, and the
    // digest of each completed build.
    let neighbour = dir.path().join("published");
    build_dense(&neighbour, Codec::Zstd, 512, 16, 3);
    let neighbour_digest = open_and_digest(&neighbour).unwrap();
    let mut neighbour_bytes = Vec::new();
    for entry in fs::read_dir(&neighbour).unwrap() {
        let entry = entry.unwrap();
        neighbour_bytes.push((entry.path(), fs::read(entry.path()).unwrap()));
    }
    let complete: Vec<_> = builds
        .iter()
        .map(|b| {
            let path = dir.path().join(format!("complete_{}", b.to_env()));
            b.build(&path, |_| {});
            open_and_digest(&path).unwrap()
        })
        .collect();

    // How long a child takes from spawn to a closed store, per build.
    let spans: Vec<Duration> = builds
        .iter()
        .enumerate()
        .map(|(k, b)| {
            let path = dir.path().join(format!("calibrate_{k}"));
            let started = Instant::now();
            let mut child = ChildTest::spawn_with("child_crash_writer", &path, b.to_env());
            assert!(child.wait_for("closed").is_some(), "{}", child.stderr());
            let span = started.elapsed();
            assert!(child.wait().success());
            assert_eq!(open_and_digest(&path).unwrap(), complete[k]);
            span
        })
        .collect();

    let mut state = 0xC0FF_EE00_D15E_A5E5_u64;
    let mut tally = KillTally::default();
    for point in 0..KILL_POINTS {
        let k = (xorshift(&mut state) % builds.len() as u64) as usize;
        let build = builds[k];
        // Uniform over the child's whole life and a little past it.
        let max = spans[k].as_micros() as u64 * 5 / 4;
        let delay = Duration::from_micros(xorshift(&mut state) % max.max(1));
        let path = dir.path().join(format!("killed_{point}"));

        let mut child = ChildTest::spawn_with("child_crash_writer", &path, build.to_env());
        std::thread::sleep(delay);
        let status = child.kill();
        let seen: Vec<String> = child.lines.try_iter().collect();
        let stderr = child.stderr();
        assert!(
            status.signal() == Some(9) || status.success(),
            "kill point {point} ({build:?}): child failed on its own: {status:?}\n{stderr}"
        );
        let appended = seen.iter().filter(|l| l.contains("appended")).count();
        if seen.iter().any(|l| l.contains("closed")) {
            tally.after_close += 1;
        } else if appended == CRASH_APPENDS as usize {
            tally.during_close += 1;
        } else if seen.iter().any(|l| l.contains("created")) {
            tally.during_append += 1;
        } else {
            tally.before_create += 1;
        }

        match open_and_digest(&path) {
            Ok(d) => {
                // Only a finished build may open, and then only whole.
                assert_eq!(
                    d, complete[k],
                    "kill point {point} ({build:?}) opened partial"
                );
                tally.opened_whole += 1;
            }
            Err(e) => {
                assert!(
                    matches!(
                        e.kind(),
                        ErrorKind::NotPublished { .. } | ErrorKind::NotAStore { .. }
                    ),
                    "kill point {point} ({build:?}, after {seen:?}): unexpected error {e}"
                );
                assert!(
                    !seen.iter().any(|l| l.contains("closed")),
                    "kill point {point}: a closed store refused to open: {e}"
                );
                tally.refused += 1;
            }
        }
        if point % 20 == 19 {
            assert_eq!(open_and_digest(&neighbour).unwrap(), neighbour_digest);
        }
    }
    for (file, bytes) in &neighbour_bytes {
        assert_eq!(
            &fs::read(file).unwrap(),
            bytes,
            "{} changed",
            file.display()
        );
    }
    eprintln!("{KILL_POINTS} kill points: {tally:?}");
    assert_eq!(tally.refused + tally.opened_whole, KILL_POINTS);
    // The random points must have landed inside the build, not only around it.
    assert!(tally.during_append > 0 && tally.refused > 0, "{tally:?}");
}

/// Child of `random_kill_points_never_leave_a_store_that_opens_wrong`: runs
/// one crash build, reporting each step on stdout.
#[test]
#[ignore = "child process, run by random_kill_points_never_leave_a_store_that_opens_wrong"]
fn child_crash_writer() {
    let (Some(path), Ok(config)) = (
        std::env::var_os(CHILD_STORE_ENV),
        std::env::var(CRASH_CONFIG_ENV),
    ) else {
        return;
    };
    let mut out = std::io::stdout();
    CrashBuild::from_env(&config).build(Path::new(&path), |event| {
        writeln!(out, "{event}").unwrap();
        out.flush().unwrap();
    });
}

// ---------------------------------------------------------------------------
// 5. Concurrency.
// ---------------------------------------------------------------------------

fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// A random index list of 1 to `max_len` indices below `n`, repeats allowed.
fn random_indices(state: &mut u64, n: u64, max_len: u64) -> Vec<u64> {
    let len = 1 + xorshift(state) % max_len;
    (0..len).map(|_| xorshift(state) % n).collect()
}

const THREADS: u64 = 8;

#[test]
fn threads_share_one_dense_reader() {
    const N: u64 = 4096;
    const W: usize = 64;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dense");
    build_dense(&path, Codec::Zstd, N, W, 4);
    let reader = Dense::<u32>::open(&path).unwrap();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let reader = &reader;
            s.spawn(move || {
                let mut state = 0x2545_F491_4F6C_DD1D ^ (t + 1);
                let mut buf = Vec::new();
                for round in 0..12 {
                    // Up to 2048 records of 256 bytes: large gathers go parallel.
                    let idx = random_indices(&mut state, N, 2048);
                    let batch = reader.gather(&idx).unwrap();
                    assert_eq!(batch.shape(), &[idx.len(), W]);
                    for (row, &i) in batch.outer_iter().zip(&idx) {
                        for (j, &v) in row.iter().enumerate() {
                            assert_eq!(v, dense_value(i, j), "thread {t} round {round} record {i}");
                        }
                    }
                    buf.resize(idx.len() * W, 0);
                    reader.gather_into(&idx, &mut buf).unwrap();
                    assert_eq!(buf, batch.into_raw_vec_and_offset().0);
                }
            });
        }
    });
}

#[test]
fn threads_share_one_ragged_reader() {
    const N: u64 = 3000;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ragged");
    let mut w = RaggedWriter::<u16>::create_with(&path, 1, &options(Codec::ZstdDict, 5)).unwrap();
    let long = |i: u64| -> Vec<u16> {
        let len = 1 + (i * 37 % 200) as usize;
        (0..len)
            .map(|j| (i as u16) ^ (j as u16).rotate_left(5))
            .collect()
    };
    w.append((0..N).map(long)).unwrap();
    w.close().unwrap();
    let reader = Ragged::<u16>::open(&path).unwrap();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let reader = &reader;
            let long = &long;
            s.spawn(move || {
                let mut state = 0x9E37_79B9_7F4A_7C15 ^ (t + 1);
                for _ in 0..12 {
                    let idx = random_indices(&mut state, N, 2048);
                    let batch = reader.gather(&idx).unwrap();
                    assert_eq!(batch.len(), idx.len());
                    for (k, &i) in idx.iter().enumerate() {
                        let expect = long(i);
                        assert_eq!(batch.shape(k), &[expect.len()]);
                        assert_eq!(batch.data(k), &expect[..], "thread {t} record {i}");
                    }
                }
            });
        }
    });
}

/// The digest every reader of the cross-process store must print.
fn cross_process_expected_digest() -> loaderx_core::StoreDigest {
    let mut d = DigestBuilder::new();
    let batch = dense_batch(0..CROSS_RECORDS, 64);
    for row in batch.outer_iter() {
        let bytes: Vec<u8> = row.iter().flat_map(|v| v.to_le_bytes()).collect();
        d.push(&[64], &bytes);
    }
    d.finish()
}

const CROSS_RECORDS: u64 = 2048;

#[test]
fn a_second_process_reads_while_this_one_does() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared");
    build_dense(&path, Codec::Zstd, CROSS_RECORDS, 64, 4);
    let expected = cross_process_expected_digest();

    // Held open (with its shared lock) until the child has finished.
    let store = Store::open(&path).unwrap();
    let mut child = ChildTest::spawn("child_reader_process", &path);
    let ours = digest(&store).unwrap();
    let line = child.wait_for(DIGEST_PREFIX);
    let status = child.wait();
    let stderr = child.stderr();
    assert!(
        status.success(),
        "child reader failed: {status:?}\n{stderr}"
    );
    let line = line.unwrap_or_else(|| panic!("child printed no digest\n{stderr}"));
    let theirs = &line[line.find(DIGEST_PREFIX).unwrap() + DIGEST_PREFIX.len()..];
    assert_eq!(ours, expected);
    assert_eq!(theirs.trim(), expected.to_string());
    drop(store);
}

/// Child of `a_second_process_reads_while_this_one_does`: digests the store
/// and checks it against the expected contents.
#[test]
#[ignore = "child process, run by a_second_process_reads_while_this_one_does"]
fn child_reader_process() {
    let Some(path) = std::env::var_os(CHILD_STORE_ENV) else {
        return;
    };
    let store = Store::open(&path).unwrap();
    let d = digest(&store).unwrap();
    assert_eq!(d, cross_process_expected_digest());
    println!("{DIGEST_PREFIX}{d}");
    std::io::stdout().flush().unwrap();
}

#[test]
fn readers_open_and_close_while_others_gather() {
    const N: u64 = 2048;
    const W: usize = 32;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dense");
    build_dense(&path, Codec::ZstdDict, N, W, 3);
    let shared = Dense::<u32>::open(&path).unwrap();
    let expected = open_and_digest(&path).unwrap();
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let shared = &shared;
            s.spawn(move || {
                let mut state = 0x51_7CC1_B727_220A ^ (t + 1);
                for _ in 0..40 {
                    let idx = random_indices(&mut state, N, 512);
                    let batch = shared.gather(&idx).unwrap();
                    for (row, &i) in batch.outer_iter().zip(&idx) {
                        assert_eq!(row[W - 1], dense_value(i, W - 1));
                    }
                }
            });
        }
        for t in 0..3u64 {
            let path = &path;
            let expected = &expected;
            s.spawn(move || {
                let mut state = 0x3C6E_F372_FE94_F82B ^ (t + 1);
                for round in 0..25 {
                    let store = Store::open(path).unwrap();
                    if round % 5 == 0 {
                        assert_eq!(&digest(&store).unwrap(), expected);
                    } else if let Store::Dense(d) = &store {
                        let idx = random_indices(&mut state, N, 64);
                        assert_eq!(d.gather_bytes(&idx).unwrap().len(), idx.len() * W * 4);
                    }
                    drop(store);
                }
            });
        }
    });
}

#[test]
fn a_writer_in_another_process_excludes_readers_and_writers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("held");
    let mut child = ChildTest::spawn("child_holding_writer", &path);
    if child.wait_for(APPENDED).is_none() {
        let _ = child.kill();
        panic!("the child writer never appended: {}", child.stderr());
    }
    assert_err!(Store::open(&path), ErrorKind::Busy { path: p } if *p == path);
    assert_err!(Dense::<u32>::open(&path), ErrorKind::Busy { .. });
    assert_err!(
        DenseWriter::<u32>::create(&path, &[WIDTH], Codec::Raw),
        ErrorKind::AlreadyExists { .. }
    );
    // Its published neighbour stays readable by both processes meanwhile.
    let other = dir.path().join("other");
    build_dense(&other, Codec::Raw, RECORDS, WIDTH, 2);
    assert_eq!(Dense::<u32>::open(&other).unwrap().len(), RECORDS);
    let status = child.kill();
    assert_eq!(status.signal(), Some(9), "{status:?}");
    // The lock dies with the process; what is left is not published.
    assert_err!(Store::open(&path), ErrorKind::NotPublished { .. });
}

/// Child of `a_writer_in_another_process_excludes_readers_and_writers`:
/// creates a store, appends once and holds the writer open until killed.
#[test]
#[ignore = "child process, run by a_writer_in_another_process_excludes_readers_and_writers"]
fn child_holding_writer() {
    let Some(path) = std::env::var_os(CHILD_STORE_ENV) else {
        return;
    };
    let mut w = DenseWriter::<u32>::create_with(&path, &[WIDTH], &options(Codec::Zstd, 2)).unwrap();
    w.append(&dense_batch(0..100, WIDTH)).unwrap();
    println!("{APPENDED}");
    std::io::stdout().flush().unwrap();
    std::thread::sleep(Duration::from_secs(30));
    drop(w);
}
