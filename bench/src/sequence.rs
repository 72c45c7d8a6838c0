//! Sequence efficiency on the ragged-token workload (d): how much of what
//! the loader hands a model is padding, and how many real tokens per
//! second it delivers, for plain random batches, length-bucketed batches,
//! token-budget batches and packed rows — one full pass each, same store,
//! same run.

use std::path::Path;
use std::time::{Duration, Instant};

use loaderx_core::SamplerMode;
use loaderx_core::adapter::PadValue;
use loaderx_core::sequence::{LengthIndex, PackOptions};
use loaderx_core::{DataLoader, DynRagged};
use rayon::prelude::*;

use crate::stores::Result;

/// Records per step (the cap for the token-budget mode).
pub const BATCH: usize = 256;
/// Tokens per packed row.
pub const ROW: usize = 512;
/// Batches per sorted window of the bucketed mode.
pub const WINDOW: u32 = 32;
/// Length buckets of the token-budget mode.
pub const BUCKETS: u32 = 32;

/// One mode's pass.
pub struct SeqRow {
    /// What was measured.
    pub name: String,
    /// Steps in the pass.
    pub steps: u64,
    /// Records delivered.
    pub records: u64,
    /// Real tokens delivered.
    pub tokens: u64,
    /// Token cells delivered (real and padding).
    pub cells: u64,
    /// Wall time of the pass.
    pub seconds: f64,
}

impl SeqRow {
    /// Padding cells over all cells.
    pub fn padding(&self) -> f64 {
        (self.cells - self.tokens) as f64 / self.cells as f64
    }

    /// Real tokens per second.
    pub fn tokens_per_s(&self) -> f64 {
        self.tokens as f64 / self.seconds
    }
}

/// How long the length index takes, two ways.
pub struct LengthTimes {
    /// From the location table (what `LengthIndex::build` does for rank 1).
    pub table: Duration,
    /// Decoding every record in full (what rank ≥ 2 needs).
    pub decode_all: Duration,
}

/// Times building the length index of `store`, from the table and by
/// decoding every record, and checks they agree.
pub fn length_times(store: &Path) -> Result<(LengthIndex, LengthTimes)> {
    let s = DynRagged::open(store)?;
    let started = Instant::now();
    let index = LengthIndex::build(&s)?;
    let table = started.elapsed();
    let started = Instant::now();
    let ids: Vec<u64> = (0..s.len()).collect();
    let decoded: Vec<u32> = ids
        .par_chunks(4096)
        .map(|c| {
            let b = s.gather(c)?;
            Ok((0..b.len())
                .map(|j| b.shape(j)[0] as u32)
                .collect::<Vec<_>>())
        })
        .collect::<std::result::Result<Vec<_>, loaderx_core::Error>>()?
        .concat();
    let decode_all = started.elapsed();
    if decoded != index.lengths() {
        return Err("length index disagrees with the decoded shapes".into());
    }
    Ok((index, LengthTimes { table, decode_all }))
}

/// One pass of every mode over the Ragged store `store` (2 workers,
/// prefetch 4), every record exactly once (`drop_last(false)`: with
/// token budgets a bucket may hold fewer records than one batch, and a
/// dropped remainder would leave records out of the comparison). Padded modes pad on the workers to `(B, longest)` host
/// arrays; the packed mode packs there into `(rows, 512)` arrays.
pub fn run(store: &Path, max_tokens: u64) -> Result<Vec<SeqRow>> {
    let open = || -> Result<loaderx_core::Stream> { Ok(DynRagged::open(store)?.into()) };
    let s = open()?;
    let mut rows = Vec::new();
    let padded: [(&str, SamplerMode); 3] = [
        ("random batches (Cyclic), padded", SamplerMode::Cyclic),
        (
            "bucketed batches (window 32 × B), padded",
            SamplerMode::Bucketed { window: WINDOW },
        ),
        (
            "token-budget batches, padded",
            SamplerMode::TokenBudget {
                max_tokens,
                buckets: BUCKETS,
            },
        ),
    ];
    for (name, mode) in padded {
        let loader = DataLoader::builder()
            .stream("tok", s.clone())
            .batch_size(if matches!(mode, SamplerMode::TokenBudget { .. }) {
                4 * BATCH
            } else {
                BATCH
            })
            .mode(mode)
            .workers(2)
            .prefetch(4)
            .drop_last(false)
            .epochs(1)
            .build_with(|b| {
                let p = b
                    .column("tok")
                    .ok_or("no tok stream")?
                    .padded(PadValue::ZERO)?;
                let tokens: i64 = p.lengths.as_slice::<i64>()?.iter().sum();
                let cells = p.values.len();
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>((b.len(), tokens as u64, cells))
            })?;
        rows.push(pass(name, loader)?);
    }
    let loader = DataLoader::builder()
        .stream("tok", s.clone())
        .batch_size(BATCH)
        .mode(SamplerMode::Cyclic)
        .workers(2)
        .prefetch(4)
        .drop_last(false)
        .epochs(1)
        .pack("tok", PackOptions::new(ROW))
        .build_with(|b| {
            let seg = b.dense::<i32>("tok.segment_ids")?;
            let tokens = seg.iter().filter(|&&s| s != 0).count();
            Ok::<_, loaderx_core::Error>((b.len(), tokens as u64, seg.len()))
        })?;
    rows.push(pass(
        "packed rows of 512 (random batches, first-fit decreasing)",
        loader,
    )?);
    Ok(rows)
}

fn pass(name: &str, loader: DataLoader<(usize, u64, usize)>) -> Result<SeqRow> {
    let started = Instant::now();
    let mut row = SeqRow {
        name: name.to_string(),
        steps: 0,
        records: 0,
        tokens: 0,
        cells: 0,
        seconds: 0.0,
    };
    for r in loader {
        let (records, tokens, cells) = r?;
        row.steps += 1;
        row.records += records as u64;
        row.tokens += tokens;
        row.cells += cells as u64;
    }
    row.seconds = started.elapsed().as_secs_f64();
    Ok(row)
}
