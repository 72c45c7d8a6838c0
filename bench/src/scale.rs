//! Datasets at scale: a multi-part dataset of many tiny parts (open time,
//! memory per part, a gather across parts against one store of the same
//! records), and the sampler's cost per batch over 2^40 records, plain and
//! as a weighted mixture (pure index arithmetic: nothing of dataset size
//! exists).

use std::path::Path;
use std::time::{Duration, Instant};

use loaderx_core::{
    Codec, CreateOptions, Dataset, DenseWriter, Mixture, MixtureStop, PartIndex, Sampler,
    SamplerMode, Store,
};

use crate::stores::Result;
use crate::timing::rate;

/// Elements (`u32`) of every record.
const WIDTH: usize = 16;
/// Records per gathered batch.
pub const BATCH: usize = 1024;

/// What the scale section measured.
pub struct ScaleReport {
    /// Parts of the dataset.
    pub parts: u64,
    /// Records of each part.
    pub part_records: usize,
    /// Records of the dataset.
    pub records: u64,
    /// Seconds the writers took for every part.
    pub write: Duration,
    /// Seconds `Dataset::merge` took (it checks every part and opens the dataset).
    pub merge: Duration,
    /// Seconds `Dataset::open` took.
    pub open: Duration,
    /// Resident memory the open dataset added, per part, bytes.
    pub rss_per_part: f64,
    /// Random gathers per second over the dataset.
    pub gather_dataset: f64,
    /// Random gathers per second over one store of the same records.
    pub gather_store: f64,
    /// `(what, batches per second)` of samplers over 2^40 records.
    pub samplers: Vec<(String, f64)>,
}

fn rss() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}

fn write(path: &Path, first: usize, n: usize) -> Result<()> {
    let mut w = DenseWriter::<u32>::create_with(
        path,
        &[WIDTH],
        &CreateOptions::new(Codec::Raw).data_shards(1),
    )?;
    let rows: Vec<u32> = (first * WIDTH..(first + n) * WIDTH)
        .map(|x| x as u32)
        .collect();
    w.append_slice(&rows, n)?;
    w.close()?;
    Ok(())
}

/// Builds a dataset of `parts` parts under `root` and measures it, then the
/// samplers, each timed for `min`.
pub fn run(root: &Path, parts: u64, part_records: usize, min: Duration) -> Result<ScaleReport> {
    let dir = root.join("scale-dataset");
    let _ = std::fs::remove_dir_all(&dir);
    let one = root.join("scale-one");
    let _ = std::fs::remove_dir_all(&one);
    let started = Instant::now();
    for p in 0..parts {
        write(
            &dir.join(Dataset::part_name(p)).join("x"),
            p as usize * part_records,
            part_records,
        )?;
    }
    let write_time = started.elapsed();
    let records = parts * part_records as u64;
    write(&one, 0, records as usize)?;
    let started = Instant::now();
    drop(Dataset::merge(&dir, Some(parts))?);
    let merge = started.elapsed();
    let before = rss();
    let started = Instant::now();
    let dataset = Dataset::open(&dir)?;
    let open = started.elapsed();
    let rss_per_part = rss().saturating_sub(before) as f64 / parts as f64;
    let x = dataset.streams()[0].1.as_dense().ok_or("not dense")?;
    let store = Store::open(&one)?;
    let single = store.as_dense().ok_or("not dense")?;
    let mut sampler = Sampler::new(records, BATCH, SamplerMode::Iid, 3)?;
    let mut out = vec![0u8; BATCH * WIDTH * 4];
    let mut check = vec![0u8; BATCH * WIDTH * 4];
    let indices = sampler.next_batch().to_vec();
    x.gather_into(&indices, &mut out)?;
    single.gather_into(&indices, &mut check)?;
    if out != check {
        return Err("the dataset's gather differs from the single store's".into());
    }
    let batches: Vec<Vec<u64>> = (0..64).map(|_| sampler.next_batch().to_vec()).collect();
    let mut k = 0;
    let gather_dataset = rate(min, 8, || {
        k = (k + 1) % batches.len();
        x.gather_into(&batches[k], &mut out).ok();
    });
    let gather_store = rate(min, 8, || {
        k = (k + 1) % batches.len();
        single.gather_into(&batches[k], &mut out).ok();
    });
    let huge = 1u64 << 40;
    let mut samplers = Vec::new();
    for (what, s) in [
        ("Cyclic", Sampler::new(huge, BATCH, SamplerMode::Cyclic, 1)?),
        (
            "Sequential",
            Sampler::new(huge, BATCH, SamplerMode::Sequential, 1)?,
        ),
        (
            "Cyclic, rank 5 of 1000",
            Sampler::builder(huge, BATCH).shard(5, 1000).build()?,
        ),
        ("mixture of 3 (60/25/15 %), 2^40 in all", {
            let lens = [huge / 2, huge / 4, huge / 4];
            let m = Mixture::new(
                &[(lens[0], 60.0), (lens[1], 25.0), (lens[2], 15.0)],
                &[SamplerMode::Cyclic; 3],
                MixtureStop::FirstExhausted,
            )?;
            Sampler::builder(huge, BATCH).mixture(m).build()?
        }),
    ] {
        let mut step = 1u64 << 30;
        let mut buf = vec![0u64; BATCH];
        let per_second = rate(min, 16, || {
            step += 1;
            s.fill(step, &mut buf).ok();
        });
        samplers.push((what.to_owned(), per_second));
    }
    drop(dataset);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&one);
    Ok(ScaleReport {
        parts,
        part_records,
        records,
        write: write_time,
        merge,
        open,
        rss_per_part,
        gather_dataset,
        gather_store,
        samplers,
    })
}

/// The map from record ids to parts over at least 2^32 logical records.
pub struct MappingRow {
    /// What the parts are.
    pub what: String,
    /// Parts.
    pub parts: usize,
    /// Records in all.
    pub records: u64,
    /// Nanoseconds per record located (random records).
    pub ns_per_record: f64,
    /// Bytes the index holds.
    pub memory: usize,
    /// Milliseconds to build the index.
    pub build_ms: f64,
}

/// [`PartIndex`] (what every multi-part stream maps its records with) over
/// part tables of ≥ 2^32 records: equal parts of several counts and a
/// skewed one (sizes spread over six orders of magnitude), each located
/// for `min` with random records, the answer checked against a scan.
pub fn mapping(min: Duration) -> Result<Vec<MappingRow>> {
    let mut x = 0x243F_6A88_85A3_08D3u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let skewed: Vec<u64> = (0..100_000)
        .map(|_| 1 + next() % (1u64 << (next() % 21)))
        .collect();
    let layouts: Vec<(String, Vec<u64>)> = vec![
        ("10 000 parts × 2^20".into(), vec![1 << 20; 10_000]),
        ("1 000 000 parts × 2^13".into(), vec![1 << 13; 1_000_000]),
        ("100 000 parts of 1 to 2^20 (skewed)".into(), {
            // Scaled up so the total passes 2^32.
            let sum: u64 = skewed.iter().sum();
            let k = (1u64 << 32).div_ceil(sum) + 1;
            skewed.iter().map(|s| s * k).collect()
        }),
    ];
    let mut rows = Vec::new();
    for (what, lengths) in layouts {
        let started = Instant::now();
        let index = PartIndex::new(lengths.iter().copied())?;
        let build_ms = started.elapsed().as_secs_f64() * 1e3;
        let records = index.len();
        let probes: Vec<u64> = (0..4096).map(|_| next() % records).collect();
        for &r in probes.iter().take(64) {
            let starts = index.starts();
            let want = starts.partition_point(|&s| s <= r) - 1;
            let (p, local) = index.locate(r).ok_or("out of range")?;
            if p != want || local != r - starts[want] {
                return Err(format!("{what}: record {r} mapped to part {p}, not {want}").into());
            }
        }
        let mut sink = 0usize;
        let per_second = rate(min, 4, || {
            for &r in &probes {
                sink = sink.wrapping_add(index.locate(r).map_or(0, |(p, _)| p));
            }
        });
        std::hint::black_box(sink);
        rows.push(MappingRow {
            what,
            parts: index.parts(),
            records,
            ns_per_record: 1e9 / (per_second * probes.len() as f64),
            memory: index.memory_bytes(),
            build_ms,
        });
    }
    Ok(rows)
}
