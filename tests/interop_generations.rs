//! Format generations against the real Python releases, one per generation:
//! loaderx 2.4.6, 2.8.12, 2.8.18 and 2.8.19.
//!
//! * every release writes its fixture matrix (`tests/python/generations.py`),
//!   and Rust reads each store: schema, length, digest and generation;
//! * Rust writes each generation it can write, and the releases that read it
//!   digest every store;
//! * [`migrate`] takes a 2.4.6 store set to 2.8.19 and back, each step
//!   checked by the release of that generation, and refuses to take a type
//!   2.4.6 cannot spell back to 2.4.6.
//!
//! A module of the `interop_python` test binary. Needs `LOADERX_PYTHON` (a
//! python with numpy, msgpack and ml_dtypes) and `LOADERX_PY_RELEASES` (one
//! `pip install --no-deps --target` folder per release, named by version);
//! `LOADERX_SKIP_PYTHON=1` skips them.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Output;

use loaderx_core::{
    Codec, CreateOptions, DType, DigestBuilder, DynDenseWriter, DynRagged, DynRaggedWriter,
    ErrorKind, Generation, Store, digest, migrate, train_dict,
};
use loaderx_tests::{generations_script, python_release};
use serde::Deserialize;

/// `OUT_DIR/manifest.json` as `generations.py write` leaves it.
#[derive(Debug, Deserialize)]
struct Manifest {
    release: String,
    stores: Vec<Entry>,
    skipped: Vec<Skipped>,
}

#[derive(Debug, Deserialize)]
struct Entry {
    name: String,
    kind: String,
    /// The NumPy dtype name (`bfloat16`, `int32`).
    dtype: String,
    codec: String,
    data_shards: usize,
    shape: Option<Vec<usize>>,
    ndim: usize,
    length: u64,
    digest: String,
    /// The version of the release that wrote it.
    generation: String,
    /// How many `append` calls wrote it.
    appends: usize,
}

#[derive(Debug, Deserialize)]
struct Skipped {
    dtype: String,
    reason: String,
}

// ---------------------------------------------------------------- Python side

/// Runs `generations.py ARGS` under Python loaderx `release`; `None` when
/// the Python tests are skipped.
fn run_release(release: &str, args: &[&OsStr]) -> Option<Output> {
    let mut cmd = python_release(release)?;
    Some(
        cmd.arg(generations_script())
            .args(args)
            .output()
            .expect("run python"),
    )
}

/// [`run_release`], asserting success; returns stdout.
fn run_release_ok(release: &str, args: &[&OsStr]) -> Option<String> {
    let out = run_release(release, args)?;
    assert!(
        out.status.success(),
        "generations.py {:?} under loaderx {release} failed ({}):\n{}",
        args.first(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8(out.stdout).expect("utf-8 output"))
}

/// Python loaderx `release` writes its matrix into a new temporary directory.
fn python_writes(release: &str, quick: bool) -> Option<(tempfile::TempDir, PathBuf, Manifest)> {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join(format!("py-{release}"));
    let mut args = vec![OsStr::new("write"), root.as_os_str()];
    if quick {
        args.push(OsStr::new("--quick"));
    }
    run_release_ok(release, &args)?;
    let manifest: Manifest =
        serde_json::from_slice(&std::fs::read(root.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest.release, release);
    Some((dir, root, manifest))
}

/// Python loaderx `release` digests `paths`: one `"<sha256>  <length>"` line
/// per store, all of which must read.
fn release_digests(release: &str, paths: &[PathBuf]) -> Option<Vec<String>> {
    let mut args = vec![OsStr::new("digest")];
    args.extend(paths.iter().map(|p| p.as_os_str()));
    let out = run_release_ok(release, &args)?;
    let lines: Vec<String> = out.lines().map(str::to_string).collect();
    assert_eq!(lines.len(), paths.len(), "loaderx {release}: {out}");
    Some(lines)
}

/// Asserts that `release` reads every one of `stores` with the digest and
/// length `expected` gives it.
fn assert_release_reads(release: &str, stores: &[(PathBuf, String, u64)]) {
    let paths: Vec<PathBuf> = stores.iter().map(|s| s.0.clone()).collect();
    let Some(lines) = release_digests(release, &paths) else {
        return;
    };
    for ((path, sha, len), line) in stores.iter().zip(lines) {
        assert_eq!(
            line,
            format!("{sha}  {len}"),
            "loaderx {release} reads {} differently",
            path.display()
        );
    }
}

// ---------------------------------------------------------------- generations

/// The generations `store` may report for a store of generation `g`.
///
/// A Dense store of 2.8.18 is byte for byte one of 2.8.19 and reported as
/// 2.8.19; an empty JSON Ragged store has no record whose dimension width
/// could tell 2.8.18 from 2.8.19.
fn reported_as(g: Generation, ragged: bool, length: u64) -> Vec<Generation> {
    match g {
        Generation::V2_8_18 | Generation::V2_8_19 if ragged && length == 0 => {
            vec![Generation::V2_8_18, Generation::V2_8_19]
        }
        Generation::V2_8_18 if !ragged => vec![Generation::V2_8_19],
        _ => vec![g],
    }
}

fn assert_generation(store: &Store, g: Generation, what: &str) {
    let ragged = matches!(store, Store::Ragged(_));
    let allowed = reported_as(g, ragged, store.len());
    assert!(
        allowed.contains(&store.generation()),
        "{what}: generation {} but expected one of {allowed:?}",
        store.generation()
    );
}

// ---------------------------------------------------------------- a: Python writes

/// Rust opens one store Python wrote and checks it against its manifest entry.
fn check_python_store(root: &Path, e: &Entry, g: Generation) {
    let path = root.join(&e.name);
    let store = Store::open(&path).unwrap_or_else(|err| panic!("{}: {err}", e.name));
    let dtype = DType::from_numpy_name(&e.dtype).unwrap();
    assert_eq!(store.dtype(), dtype, "{}", e.name);
    assert_eq!(store.codec().name(), e.codec, "{}", e.name);
    assert_eq!(store.data_shards(), e.data_shards, "{}", e.name);
    assert_eq!(store.len(), e.length, "{}", e.name);
    match (&store, e.kind.as_str()) {
        (Store::Dense(s), "dense") => {
            assert_eq!(Some(s.item_shape().to_vec()), e.shape, "{}", e.name);
        }
        (Store::Ragged(s), "ragged") => assert_eq!(s.ndim(), e.ndim, "{}", e.name),
        _ => panic!("{}: kind {} but opened {:?}", e.name, e.kind, store.kind()),
    }
    assert_eq!(e.generation, g.version(), "{}", e.name);
    assert_generation(&store, g, &e.name);
    let d = digest(&store).unwrap_or_else(|err| panic!("{}: {err}", e.name));
    assert_eq!(d.length, e.length, "{}", e.name);
    assert_eq!(d.sha256, e.digest, "{}: digest differs", e.name);
}

/// What every release's matrix must hold.
fn assert_matrix_coverage(release: &str, stores: &[Entry]) {
    let kinds_codecs: BTreeSet<(&str, &str)> = stores
        .iter()
        .map(|e| (e.kind.as_str(), e.codec.as_str()))
        .collect();
    assert_eq!(kinds_codecs.len(), 6, "{release}: {kinds_codecs:?}");
    let ranks: BTreeSet<(&str, usize)> = stores.iter().map(|e| (e.kind.as_str(), e.ndim)).collect();
    for rank in 0..=3 {
        assert!(
            ranks.contains(&("dense", rank)),
            "{release}: dense rank {rank}"
        );
    }
    for ndim in 1..=3 {
        assert!(
            ranks.contains(&("ragged", ndim)),
            "{release}: ragged ndim {ndim}"
        );
    }
    let shards: BTreeSet<usize> = stores.iter().map(|e| e.data_shards).collect();
    for n in [1, 4, 7, 255] {
        assert!(shards.contains(&n), "{release}: no store of {n} shards");
    }
    for kind in ["dense", "ragged"] {
        assert!(
            stores.iter().any(|e| e.kind == kind && e.length == 0),
            "{release}: no empty {kind} store"
        );
        assert!(
            stores.iter().any(|e| e.kind == kind && e.appends > 2),
            "{release}: no multi-append {kind} store"
        );
    }
}

fn python_release_writes_rust_reads(release: &str) {
    let Some((_dir, root, manifest)) = python_writes(release, false) else {
        return;
    };
    let g: Generation = release.parse().unwrap();
    // The release writes exactly the types Rust says its generation holds.
    let written: BTreeSet<&str> = manifest.stores.iter().map(|e| e.dtype.as_str()).collect();
    for d in DType::ALL {
        assert_eq!(
            written.contains(d.numpy_name()),
            g.supports(d),
            "loaderx {release} and Generation::supports disagree on {}; skipped: {:?}",
            d.numpy_name(),
            manifest.skipped
        );
    }
    for s in &manifest.skipped {
        let d = DType::from_numpy_name(&s.dtype).unwrap();
        assert!(
            !g.supports(d),
            "{release} skipped {}: {}",
            s.dtype,
            s.reason
        );
    }
    assert_matrix_coverage(release, &manifest.stores);
    for e in &manifest.stores {
        check_python_store(&root, e, g);
    }

    if g == Generation::V2_8_19 {
        // Packed reads: the release's `RaggedBatch` and ours, byte for byte,
        // for every Ragged store it wrote (every type, rank, codec, shards).
        let reads: Vec<(PathBuf, Vec<u64>)> = manifest
            .stores
            .iter()
            .filter(|e| e.kind == "ragged" && e.length > 0)
            .map(|e| {
                let n = e.length;
                (root.join(&e.name), vec![n - 1, 0, n / 2, 0, 7.min(n - 1)])
            })
            .collect();
        assert!(reads.len() >= 20, "{} ragged stores", reads.len());
        assert_packed_reads_match(release, &reads);

        // d: a type 2.4.6 cannot spell does not migrate back to 2.4.6.
        let bf16 = manifest
            .stores
            .iter()
            .find(|e| e.dtype == "bfloat16" && e.length > 0)
            .expect("a bfloat16 store");
        let dst = root.with_file_name("bf16-to-2.4.6");
        let err = migrate(root.join(&bf16.name), &dst, Generation::V2_4_6).unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::InvalidArgument { .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("2.8.19"), "{err}");
        assert!(Store::open(&dst).is_err(), "a refused migrate left a store");
    }
}

/// Python loaderx `release` reads each `(store, indices)` of `reads` packed
/// (`generations.py packed`); our packed gathers hold the same `values`,
/// `cu_seqlens` and `shapes` bytes.
fn assert_packed_reads_match(release: &str, reads: &[(PathBuf, Vec<u64>)]) {
    let out = tempfile::tempdir().unwrap();
    let specs: Vec<String> = reads
        .iter()
        .map(|(path, idx)| {
            let idx: Vec<String> = idx.iter().map(u64::to_string).collect();
            format!("{}={}", path.display(), idx.join(","))
        })
        .collect();
    let mut args = vec![OsStr::new("packed"), out.path().as_os_str()];
    args.extend(specs.iter().map(OsStr::new));
    if run_release_ok(release, &args).is_none() {
        return;
    }
    for (k, (path, idx)) in reads.iter().enumerate() {
        let theirs = |field: &str| std::fs::read(out.path().join(format!("{k}.{field}"))).unwrap();
        let ours = DynRagged::open(path)
            .unwrap()
            .gather_packed(idx)
            .unwrap()
            .packed()
            .unwrap();
        let what = path.display();
        assert_eq!(ours.values.bytes(), theirs("values"), "{what}: values");
        assert_eq!(
            ours.cu_seqlens.bytes(),
            theirs("cu_seqlens"),
            "{what}: cu_seqlens"
        );
        assert_eq!(ours.shapes.bytes(), theirs("shapes"), "{what}: shapes");
    }
}

#[test]
fn python_2_4_6_writes_rust_reads() {
    python_release_writes_rust_reads("2.4.6");
}

#[test]
fn python_2_8_12_writes_rust_reads() {
    python_release_writes_rust_reads("2.8.12");
}

#[test]
fn python_2_8_18_writes_rust_reads() {
    python_release_writes_rust_reads("2.8.18");
}

#[test]
fn python_2_8_19_writes_rust_reads_and_bf16_stays_out_of_2_4_6() {
    python_release_writes_rust_reads("2.8.19");
}

// ---------------------------------------------------------------- b: Rust writes

/// Deterministic bytes (splitmix64); `bool` bytes are 0 or 1.
fn noise(seed: u64, n: usize, dtype: DType) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0xA076_1D64_78BD_642F);
    let mut out = Vec::with_capacity(n + 8);
    while out.len() < n {
        s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        out.extend_from_slice(&z.to_le_bytes());
    }
    out.truncate(n);
    if dtype == DType::Bool {
        out.iter_mut().for_each(|b| *b &= 1);
    }
    out
}

/// Bit patterns of an IEEE-like float's special values (as generations.py
/// plants them): +-0, +-inf, quiet, payload and signalling NaNs, the
/// smallest and largest subnormals, the smallest normal, +-max, 1.0, -1.5.
fn float_specials(exp: u32, man: u32) -> Vec<u64> {
    let sign = 1u64 << (exp + man);
    let exp_all = ((1u64 << exp) - 1) << man;
    let quiet = 1u64 << (man - 1);
    let one = ((1u64 << (exp - 1)) - 1) << man;
    let pos = [
        0,
        exp_all,
        exp_all | quiet,
        exp_all | quiet | 1,
        exp_all | 1,
        exp_all | ((1 << man) - 1),
        1,
        (1 << man) - 1,
        1 << man,
        exp_all - 1,
        one,
        one | quiet,
    ];
    pos.iter()
        .copied()
        .chain(pos.iter().map(|p| p | sign))
        .collect()
}

/// Little-endian element bytes to plant at the front of a random buffer.
fn specials(dtype: DType) -> Vec<u8> {
    let ints = |min: i128, max: i128, w: usize| -> Vec<u8> {
        [min, max, 0, 1]
            .iter()
            .flat_map(|v| v.to_le_bytes()[..w].to_vec())
            .collect()
    };
    let floats = |exp, man, w: usize| -> Vec<u8> {
        float_specials(exp, man)
            .iter()
            .flat_map(|v| v.to_le_bytes()[..w].to_vec())
            .collect()
    };
    match dtype {
        DType::Bool => vec![0, 1],
        DType::F16 => floats(5, 10, 2),
        DType::BF16 => floats(8, 7, 2),
        DType::F32 => floats(8, 23, 4),
        DType::F64 => floats(11, 52, 8),
        // (re, im) pairs of the component type's specials, mirrored.
        DType::C64 | DType::C128 => {
            let (exp, man, w) = if dtype == DType::C64 {
                (8, 23, 4)
            } else {
                (11, 52, 8)
            };
            let s = float_specials(exp, man);
            (0..s.len())
                .flat_map(|i| [s[i], s[s.len() - 1 - i]])
                .flat_map(|v| v.to_le_bytes()[..w].to_vec())
                .collect()
        }
        d if d.size() == 1 && d.int_range().is_none() => (0..=255).rev().collect(),
        d => {
            let (min, max) = d.int_range().expect("an integer type");
            ints(min, max, d.size())
        }
    }
}

/// `n` bytes of `dtype` elements: random bits with the specials planted
/// first, or small byte values (compressible) when `low`.
fn elements(seed: u64, n: usize, dtype: DType, low: bool) -> Vec<u8> {
    let mut out = noise(seed, n, dtype);
    if low {
        let mask = if dtype == DType::Bool { 1 } else { 3 };
        out.iter_mut().for_each(|b| *b &= mask);
        return out;
    }
    let sp = specials(dtype);
    let k = sp.len().min(n / dtype.size() * dtype.size());
    out[..k].copy_from_slice(&sp[..k]);
    out
}

/// Every bit pattern of a 1- or 2-byte type, in code order.
fn all_codes(dtype: DType) -> Vec<u8> {
    match dtype.size() {
        1 => (0..=255u8).collect(),
        2 => (0..=u16::MAX).flat_map(u16::to_le_bytes).collect(),
        w => panic!("{w}-byte type"),
    }
}

/// One store Rust wrote, with what its source digests to.
struct Written {
    path: PathBuf,
    ragged: bool,
    digest: String,
    length: u64,
}

struct RustMatrix {
    root: PathBuf,
    g: Generation,
    seed: u64,
    stores: Vec<Written>,
}

fn fallback_dict() -> Vec<u8> {
    train_dict(elements(1, 1 << 16, DType::U8, true).chunks(64)).unwrap()
}

impl RustMatrix {
    fn options(
        &self,
        codec: Codec,
        shards: usize,
        dict: impl FnOnce() -> Vec<u8>,
    ) -> CreateOptions {
        let o = CreateOptions::new(codec)
            .data_shards(shards)
            .generation(self.g);
        if codec == Codec::ZstdDict {
            o.dict_bytes(dict())
        } else {
            o
        }
    }

    fn path(&self, what: String) -> PathBuf {
        self.root.join(format!("{:03}_{what}", self.stores.len()))
    }

    /// A Dense store of `sum(splits)` records, one `append` per split;
    /// `data` overrides the generated elements.
    #[allow(clippy::too_many_arguments)]
    fn dense(
        &mut self,
        dtype: DType,
        shape: &[usize],
        codec: Codec,
        shards: usize,
        splits: &[usize],
        low: bool,
        data: Option<Vec<u8>>,
    ) {
        self.seed += 1;
        let width = shape.iter().product::<usize>() * dtype.size();
        let n: usize = splits.iter().sum();
        let data = data.unwrap_or_else(|| elements(self.seed, n * width, dtype, low));
        assert_eq!(data.len(), n * width);
        let label = if shape.is_empty() {
            "scalar".to_string()
        } else {
            format!("{shape:?}")
                .replace([' ', '[', ']'], "")
                .replace(',', "x")
        };
        let path = self.path(format!(
            "dense_{}_{label}_{codec}_s{shards}_n{n}",
            dtype.numpy_name()
        ));
        let opts = self.options(codec, shards, || {
            train_dict(data.chunks(width.max(8))).unwrap_or_else(|_| fallback_dict())
        });
        let mut w = DynDenseWriter::create(&path, dtype, shape, &opts)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut at = 0;
        for &k in splits {
            w.append_bytes(&data[at * width..(at + k) * width], k)
                .unwrap();
            at += k;
        }
        w.close().unwrap();
        let mut d = DigestBuilder::new();
        for rec in data.chunks(width).take(n) {
            d.push(shape, rec);
        }
        self.stores.push(Written {
            path,
            ragged: false,
            digest: d.finish().sha256,
            length: n as u64,
        });
    }

    /// A Ragged store of `sum(splits)` records of rank `ndim`.
    #[allow(clippy::too_many_arguments)]
    fn ragged(
        &mut self,
        dtype: DType,
        ndim: usize,
        codec: Codec,
        shards: usize,
        splits: &[usize],
        low: bool,
    ) {
        self.seed += 1;
        let seed = self.seed;
        let n: usize = splits.iter().sum();
        let max = if n > 1000 { 4 } else { 9 - 2 * ndim.min(3) };
        let shapes: Vec<Vec<usize>> = (0..n)
            .map(|i| {
                noise(seed ^ ((i as u64) << 20), ndim, DType::U8)
                    .iter()
                    .map(|&b| 1 + b as usize % max)
                    .collect()
            })
            .collect();
        let records: Vec<Vec<u8>> = shapes
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let len = s.iter().product::<usize>() * dtype.size();
                elements(seed + 7919 * i as u64, len, dtype, low)
            })
            .collect();
        let path = self.path(format!(
            "ragged_{}_nd{ndim}_{codec}_s{shards}_n{n}",
            dtype.numpy_name()
        ));
        let opts = self.options(codec, shards, || {
            train_dict(&records).unwrap_or_else(|_| fallback_dict())
        });
        let mut w = DynRaggedWriter::create(&path, dtype, ndim, &opts)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut at = 0;
        for &k in splits {
            w.append_bytes((at..at + k).map(|i| (&shapes[i][..], &records[i][..])))
                .unwrap();
            at += k;
        }
        w.close().unwrap();
        let mut d = DigestBuilder::new();
        for (s, r) in shapes.iter().zip(&records) {
            d.push(s, r);
        }
        self.stores.push(Written {
            path,
            ragged: true,
            digest: d.finish().sha256,
            length: n as u64,
        });
    }
}

/// Rust writes the matrix of generation `g` under `root`.
fn rust_matrix(root: &Path, g: Generation) -> RustMatrix {
    const CODECS: [Codec; 3] = [Codec::Raw, Codec::Zstd, Codec::ZstdDict];
    const SHARDS: [usize; 3] = [1, 4, 7];
    const SHAPES: [&[usize]; 4] = [&[], &[3], &[2, 3, 2], &[17, 5]];
    std::fs::create_dir(root).unwrap();
    let mut m = RustMatrix {
        root: root.to_path_buf(),
        g,
        seed: 0x2819,
        stores: Vec::new(),
    };
    let dtypes: Vec<DType> = DType::ALL.into_iter().filter(|&d| g.supports(d)).collect();
    // Every type, both kinds; the rotations give every codec every Dense
    // rank, every Ragged ndim and every shard count.
    for (k, &dtype) in dtypes.iter().enumerate() {
        let c = (k + k / 3) % 3;
        m.dense(
            dtype,
            SHAPES[k % 4],
            CODECS[c],
            SHARDS[(k / 2) % 3],
            &[1, 20, 9],
            false,
            None,
        );
        m.ragged(
            dtype,
            1 + k % 3,
            CODECS[(c + 1) % 3],
            SHARDS[(k + 1) % 3],
            &[3, 17, 5],
            false,
        );
    }
    for codec in CODECS {
        m.dense(DType::I32, &[64], codec, 4, &[100, 200], true, None);
        m.ragged(DType::U8, 2, codec, 7, &[100, 200], true);
        m.dense(DType::F32, &[3], codec, 4, &[], false, None);
        m.ragged(DType::I64, 2, codec, 1, &[], false);
    }
    m.dense(
        DType::U32,
        &[2],
        Codec::Zstd,
        255,
        &[1, 254, 345],
        false,
        None,
    );
    m.ragged(DType::U16, 1, Codec::ZstdDict, 255, &[255, 345], false);
    m.dense(DType::I8, &[], Codec::Raw, 255, &[10, 290], false, None);
    // Every code of the 1- and 2-byte floats; the specials of the others.
    let floats = dtypes
        .iter()
        .filter(|d| d.int_range().is_none())
        .enumerate();
    for (j, &dtype) in floats {
        let codec = CODECS[j % 3];
        if dtype.size() <= 2 {
            let codes = all_codes(dtype);
            let n = codes.len() / 256 / dtype.size();
            let splits: Vec<usize> = if n > 1 {
                vec![n / 2, n - n / 2]
            } else {
                vec![1]
            };
            m.dense(
                dtype,
                &[256],
                codec,
                SHARDS[j % 3],
                &splits,
                false,
                Some(codes),
            );
        } else {
            m.dense(dtype, &[8], codec, SHARDS[j % 3], &[1, 39], false, None);
            m.ragged(
                dtype,
                1,
                CODECS[(j + 1) % 3],
                SHARDS[(j + 2) % 3],
                &[1, 11],
                false,
            );
        }
    }
    // More than 32768 records, across several appends.
    m.dense(
        DType::U16,
        &[4],
        Codec::Zstd,
        7,
        &[1, 33_000, 6_999],
        false,
        None,
    );
    m.ragged(DType::I32, 2, Codec::ZstdDict, 4, &[1, 33_000, 6_999], true);
    m
}

fn rust_writes_python_reads(g: Generation, readers: &[&str]) {
    if python_release(g.version()).is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let m = rust_matrix(&dir.path().join(format!("rust-{g}")), g);
    for w in &m.stores {
        let store = Store::open(&w.path).unwrap();
        assert_generation(&store, g, &w.path.display().to_string());
        assert_eq!(
            digest(&store).unwrap().sha256,
            w.digest,
            "{}",
            w.path.display()
        );
    }
    let all: Vec<(PathBuf, String, u64)> = m
        .stores
        .iter()
        .map(|w| (w.path.clone(), w.digest.clone(), w.length))
        .collect();
    assert_release_reads(g.version(), &all);
    for &release in readers {
        // 2.8.18 reads 2.8.19's Dense stores, never its Ragged ones.
        let readable: Vec<(PathBuf, String, u64)> = m
            .stores
            .iter()
            .zip(&all)
            .filter(|(w, _)| !(release == "2.8.18" && w.ragged))
            .map(|(_, s)| s.clone())
            .collect();
        assert_release_reads(release, &readable);
    }
}

#[test]
fn rust_writes_2_4_6_python_2_4_6_and_2_8_12_read() {
    rust_writes_python_reads(Generation::V2_4_6, &["2.8.12"]);
}

#[test]
fn rust_writes_2_8_19_python_2_8_19_and_2_8_18_read() {
    rust_writes_python_reads(Generation::V2_8_19, &["2.8.18"]);
}

// ---------------------------------------------------------------- c: migrate

/// Migrates every store under `from` into `to` (same names), checking what
/// Rust reads there.
fn migrate_all(stores: &[Entry], from: &Path, to: &Path, g: Generation) -> Vec<PathBuf> {
    std::fs::create_dir(to).unwrap();
    stores
        .iter()
        .map(|e| {
            let (src, dst) = (from.join(&e.name), to.join(&e.name));
            migrate(&src, &dst, g).unwrap_or_else(|err| panic!("{} to {g}: {err}", e.name));
            let store = Store::open(&dst).unwrap();
            assert_generation(&store, g, &dst.display().to_string());
            assert_eq!(store.codec().name(), e.codec, "{}", e.name);
            assert_eq!(store.data_shards(), e.data_shards, "{}", e.name);
            assert_eq!(store.dtype().numpy_name(), e.dtype, "{}", e.name);
            assert_eq!(digest(&store).unwrap().sha256, e.digest, "{}", e.name);
            dst
        })
        .collect()
}

#[test]
fn migrate_python_2_4_6_to_2_8_19_and_back() {
    let Some((dir, root, manifest)) = python_writes("2.4.6", true) else {
        return;
    };
    let expected = |paths: &[PathBuf]| -> Vec<(PathBuf, String, u64)> {
        paths
            .iter()
            .zip(&manifest.stores)
            .map(|(p, e)| (p.clone(), e.digest.clone(), e.length))
            .collect()
    };
    let up = migrate_all(
        &manifest.stores,
        &root,
        &dir.path().join("to-2.8.19"),
        Generation::V2_8_19,
    );
    assert_release_reads("2.8.19", &expected(&up));
    let down = migrate_all(
        &manifest.stores,
        &dir.path().join("to-2.8.19"),
        &dir.path().join("back-to-2.4.6"),
        Generation::V2_4_6,
    );
    assert_release_reads("2.4.6", &expected(&down));
}
