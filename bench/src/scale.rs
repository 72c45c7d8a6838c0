//! Datasets at scale: a multi-part dataset of many tiny parts (open time,
//! memory per part, a gather across parts against one store of the same
//! records), and the sampler's cost per batch over 2^40 records, plain and
//! as a weighted mixture (pure index arithmetic: nothing of dataset size
//! exists).

use std::path::Path;
use std::time::{Duration, Instant};

use loaderx_core::{
    Codec, CreateOptions, Dataset, DenseWriter, Mixture, MixtureStop, Sampler, SamplerMode, Store,
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
