//! Seed corpora: small valid inputs for every target, written by the
//! library's own writers, so the fuzzer starts from real stores.

use std::fs;
use std::io;
use std::path::Path;

use loaderx_core::format::Schema;
use loaderx_core::{Codec, CreateOptions, DType, DynDenseWriter, DynRaggedWriter, Generation};

use crate::input::StoreInput;

/// Records in each seed store.
const RECORDS: usize = 7;

/// Writes every target's seeds under `dir/<target>/`; returns how many.
pub fn write_all(dir: &Path) -> io::Result<usize> {
    let mut n = 0;
    for (target, seeds) in [
        ("store", store_seeds()?),
        ("ragged_record", ragged_record_seeds()),
        ("schema", schema_seeds()),
        ("sampler", sampler_seeds()),
        ("mixture", mixture_seeds()),
        ("manifest", manifest_seeds()?),
    ] {
        let out = dir.join(target);
        fs::create_dir_all(&out)?;
        for (name, bytes) in seeds {
            fs::write(out.join(format!("seed_{name}")), bytes)?;
            n += 1;
        }
    }
    Ok(n)
}

fn options(codec: Codec, shards: usize) -> CreateOptions {
    let o = CreateOptions::new(codec).data_shards(shards);
    if codec == Codec::ZstdDict {
        // A dictionary trained by zstd, with its magic, header and entropy
        // tables: mutating those is where a damaged dict.zr used to panic.
        o.dict_bytes(trained_dict())
    } else {
        o
    }
}

/// A small dictionary trained by zstd (the same every time).
fn trained_dict() -> Vec<u8> {
    let records: Vec<Vec<u8>> = (0..2000u32)
        .map(|i| {
            (0..96)
                .map(|k| ((i % 13) * 17 + k * 3 + i / 50) as u8)
                .collect()
        })
        .collect();
    match loaderx_core::train_dict(&records) {
        Ok(d) => d,
        Err(e) => panic!("training the seed dictionary: {e}"),
    }
}

fn other(e: loaderx_core::Error) -> io::Error {
    io::Error::other(e.to_string())
}

/// Element bytes of record `i`, `n` elements of `dtype` (valid for bool).
fn elements(dtype: DType, i: usize, n: usize) -> Vec<u8> {
    (0..n * dtype.size())
        .map(|k| {
            if dtype == DType::Bool {
                ((i + k) % 2) as u8
            } else {
                (i * 7 + k % 5) as u8
            }
        })
        .collect()
}

/// Dense and Ragged stores over the codecs, several dtypes, ranks and shard counts.
pub fn store_seeds() -> io::Result<Vec<(String, Vec<u8>)>> {
    let tmp = std::env::temp_dir().join(format!("loaderx-seeds-{}", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    fs::create_dir_all(&tmp)?;
    let mut seeds = Vec::new();
    let cases = [
        (DType::U8, &[4usize][..], 1usize),
        (DType::I32, &[2, 3][..], 3),
        (DType::F16, &[][..], 2),
        (DType::Bool, &[5][..], 1),
        (DType::F64, &[2][..], 4),
    ];
    for (codec, generation) in [
        (Codec::Raw, Generation::V2_4_6),
        (Codec::Zstd, Generation::V2_4_6),
        (Codec::ZstdDict, Generation::V2_4_6),
        (Codec::Raw, Generation::V2_8_19),
        (Codec::Zstd, Generation::V2_8_19),
    ] {
        let options = |codec, shards| options(codec, shards).generation(generation);
        for &(dtype, shape, shards) in &cases {
            let name = format!(
                "dense_{dtype}_{}d_{codec}_{shards}s_{generation}",
                shape.len()
            );
            let path = tmp.join(&name);
            let mut w = DynDenseWriter::create(&path, dtype, shape, &options(codec, shards))
                .map_err(other)?;
            let per: usize = shape.iter().product();
            let bytes: Vec<u8> = (0..RECORDS).flat_map(|i| elements(dtype, i, per)).collect();
            w.append_bytes(&bytes, RECORDS).map_err(other)?;
            w.close().map_err(other)?;
            seeds.push((name, StoreInput::read_dir(&path)?.encode()));
        }
        for (dtype, ndim, shards) in [(DType::U16, 1, 2), (DType::U8, 3, 1), (DType::F32, 2, 3)] {
            let name = format!("ragged_{dtype}_{ndim}d_{codec}_{shards}s_{generation}");
            let path = tmp.join(&name);
            let mut w = DynRaggedWriter::create(&path, dtype, ndim, &options(codec, shards))
                .map_err(other)?;
            let records: Vec<(Vec<usize>, Vec<u8>)> = (0..RECORDS)
                .map(|i| {
                    let shape: Vec<usize> = (0..ndim).map(|a| 1 + (i + a) % 3).collect();
                    let n = shape.iter().product();
                    (shape, elements(dtype, i, n))
                })
                .collect();
            w.append_bytes(records.iter().map(|(s, b)| (&s[..], &b[..])))
                .map_err(other)?;
            w.close().map_err(other)?;
            seeds.push((name, StoreInput::read_dir(&path)?.encode()));
        }
    }
    let _ = fs::remove_dir_all(&tmp);
    Ok(seeds)
}

/// `[dtype, ndim - 1, codec]` and a valid payload (shape header, elements).
pub fn ragged_record_seeds() -> Vec<(String, Vec<u8>)> {
    let mut seeds = Vec::new();
    for (k, shape) in [&[3usize][..], &[2, 2], &[1, 0, 4], &[2, 1, 1, 3]]
        .iter()
        .enumerate()
    {
        for (d, dtype) in DType::ALL
            .iter()
            .enumerate()
            .filter(|(d, _)| d % 3 == k % 3)
        {
            // Codec byte: raw/zstd in the low bit, then the generation
            // (0: 2.4.6, 3: JSON, whose record carries u32 dims here).
            for codec in [0u8, 1, 6, 7] {
                let n: usize = shape.iter().product();
                let mut bytes = vec![d as u8, (shape.len() - 1) as u8, codec];
                for &dim in *shape {
                    if codec >> 1 == 3 {
                        bytes.extend_from_slice(&(dim as u32).to_le_bytes());
                    } else {
                        bytes.extend_from_slice(&(dim as u64).to_le_bytes());
                    }
                }
                bytes.extend(elements(*dtype, k, n));
                seeds.push((format!("{dtype}_{}d_{codec}", shape.len()), bytes));
            }
        }
    }
    seeds
}

/// Dense and Ragged schemas as the writer encodes them.
pub fn schema_seeds() -> Vec<(String, Vec<u8>)> {
    let mut seeds = Vec::new();
    for (d, dtype) in DType::ALL.iter().enumerate() {
        let shape: Vec<usize> = (0..d % 4).map(|a| 2 + a).collect();
        for g in [Generation::V2_4_6, Generation::V2_8_12, Generation::V2_8_19] {
            if let Ok(bytes) = Schema::dense(*dtype, &shape).and_then(|s| s.encode(g)) {
                seeds.push((format!("dense_{dtype}_{}d_{g}", shape.len()), bytes));
            }
            if let Ok(bytes) = Schema::ragged(*dtype, 1 + d % 3).and_then(|s| s.encode(g)) {
                seeds.push((format!("ragged_{dtype}_{}d_{g}", 1 + d % 3), bytes));
            }
        }
    }
    seeds
}

/// Mixture inputs as little-endian u64 words: `sources - 1`, each source's
/// `len << 1 | sequential` and weight bits, the stop rule, the probed
/// position (high, low word), `batch - 1`, `world - 1`, seed, flags (1:
/// `drop_last`, 2: resume, 4: the resume's records unreduced), step, the
/// resume's epoch and records, `views - 1`.
pub fn mixture_seeds() -> Vec<(String, Vec<u8>)> {
    let source = |len: u64, sequential: bool, weight: f64| {
        [len << 1 | u64::from(sequential), weight.to_bits()]
    };
    let tail = |rest: [u64; 11]| rest.to_vec();
    let mut cases: Vec<(&str, Vec<u64>)> = Vec::new();
    let mut three = vec![2];
    three.extend(source(1000, false, 60.0));
    three.extend(source(500, false, 25.0));
    three.extend(source(200, true, 15.0));
    three.extend(tail([1, 0, 0, 31, 0, 7, 0, 40, 0, 0, 3]));
    cases.push(("three_sources", three));
    let mut resumed = vec![1];
    resumed.extend(source(100, false, 3.0));
    resumed.extend(source(50, true, 1.0));
    resumed.extend(tail([0, 0, 1000, 7, 3, 1, 2, 3, 1, 97, 1]));
    cases.push(("sharded_resumed", resumed));
    let mut huge = vec![2];
    huge.extend(source(10, true, f64::MAX));
    huge.extend(source(20, false, f64::MAX / 2.0));
    huge.extend(source(30, true, f64::from_bits(1)));
    huge.extend(tail([
        2,
        u64::MAX,
        u64::MAX,
        63,
        2,
        5,
        1,
        u64::MAX,
        0,
        0,
        7,
    ]));
    cases.push(("huge_weights", huge));
    let mut many = vec![15];
    for s in 1..=16u64 {
        many.extend(source(s, s % 3 == 0, s as f64));
    }
    many.extend(tail([0, 0, 12345, 255, 7, 9, 6, 5, u64::MAX, 3, 2]));
    cases.push(("many_sources", many));
    let mut nan = vec![1];
    nan.extend(source(5, false, 1.0));
    nan.extend(source(5, false, f64::NAN));
    nan.extend(tail([0; 11]));
    cases.push(("nan_weight", nan));
    let mut last = vec![0];
    last.extend(source(7, true, 0.5));
    last.extend(tail([2, 0, 6, 2, 1, 0, 3, 9, 0, 6, 1]));
    cases.push(("one_source_resumed", last));
    cases
        .into_iter()
        .map(|(name, words)| {
            (
                name.to_string(),
                words.iter().flat_map(|w| w.to_le_bytes()).collect(),
            )
        })
        .collect()
}

/// `(len, batch, mode, seed, world, step)` as little-endian u64 words.
pub fn sampler_seeds() -> Vec<(String, Vec<u8>)> {
    let cases: [(&str, [u64; 6]); 6] = [
        ("sequential", [1000, 32, 0, 1, 0, 5]),
        ("iid", [60_000, 256, 1, 42, 0, 123_456]),
        ("cyclic", [60_000, 256, 2, 7, 0, 300]),
        ("cyclic_sharded", [1 << 40, 64, 2, 9, 3, 1 << 33]),
        ("cyclic_small", [5, 2, 2, 3, 1, 11]),
        ("iid_huge", [u64::MAX, 8, 1, 0, 7, u64::MAX]),
    ];
    cases
        .iter()
        .map(|(name, words)| {
            (
                (*name).to_string(),
                words.iter().flat_map(|w| w.to_le_bytes()).collect(),
            )
        })
        .collect()
}

/// The manifest `Dataset::merge` writes for the layout of
/// [`crate::targets::manifest_layout`], whole, compact, truncated, and with
/// a part or stream fewer.
pub fn manifest_seeds() -> io::Result<Vec<(String, Vec<u8>)>> {
    let dir = std::env::temp_dir().join(format!("loaderx-seeds-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    let made = crate::targets::manifest_layout(&dir).map_err(io::Error::other);
    let _ = fs::remove_dir_all(&dir);
    let whole = made?;
    let text = String::from_utf8_lossy(&whole).into_owned();
    let compact: String = text.split_whitespace().collect();
    let mut seeds = vec![
        ("merged".to_string(), whole.clone()),
        ("compact".to_string(), compact.clone().into_bytes()),
        (
            "truncated_half".to_string(),
            whole[..whole.len() / 2].to_vec(),
        ),
        (
            "truncated_end".to_string(),
            whole[..whole.len() - 3].to_vec(),
        ),
    ];
    // No digests (a manifest of an older loaderx), fewer parts, one stream.
    let old: String = text
        .lines()
        .filter(|l| !l.contains("table_digest"))
        .map(|l| {
            l.replace("\"records\": 5,", "\"records\": 5")
                .replace("\"records\": 0,", "\"records\": 0")
                .replace("\"records\": 4,", "\"records\": 4")
        })
        .collect::<Vec<_>>()
        .join("\n");
    seeds.push(("no_digests".to_string(), old.into_bytes()));
    seeds.push((
        "lying_records".to_string(),
        text.replacen("\"records\": 9", "\"records\": 10", 1)
            .into_bytes(),
    ));
    Ok(seeds)
}
