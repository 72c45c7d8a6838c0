//! Sampler throughput: this crate's IID sampler against the `rand` crate
//! filling the same buffer uniformly, and against Python loaderx.

use std::path::Path;
use std::time::Duration;

use loaderx_core::{Sampler, SamplerMode};
use rand::SeedableRng;
use rand::distr::{Distribution, Uniform};
use rand::rngs::SmallRng;

use crate::stores::Result;
use crate::timing::rate;

/// One row of the sampler table.
pub struct SamplerRow {
    /// Batch size.
    pub batch: usize,
    /// Indices per second of this crate's IID sampler.
    pub ours: f64,
    /// `rand::rng()` (rand's default, ChaCha12) + `Uniform` filling the same buffer.
    pub rand_default: f64,
    /// `rand`'s `SmallRng` (Xoshiro256++) + `Uniform` filling the same buffer.
    pub rand_small: f64,
    /// Python loaderx `Sampler.next()`, when a Python was given.
    pub python: Option<f64>,
}

/// Records in the sampled dataset.
pub const N: u64 = 1_000_000;
/// Batch sizes measured.
pub const BATCHES: [usize; 3] = [256, 1024, 8192];

/// Measures every batch size for `min` each.
pub fn run(min: Duration, python: Option<&Path>) -> Result<Vec<SamplerRow>> {
    let mut rows = Vec::new();
    for batch in BATCHES {
        let mut s = Sampler::new(N, batch, SamplerMode::Iid, 42)?;
        let mut check = 0u64;
        let ours = rate(min, 100, || {
            check ^= std::hint::black_box(s.next_batch())[0];
        }) * batch as f64;
        let uniform = Uniform::new(0, N)?;
        let mut buf = vec![0u64; batch];
        let mut fill = |rng: &mut dyn rand::RngCore| {
            let rng = &mut *rng;
            let mut check = 0;
            rate(min, 100, || {
                buf.iter_mut().for_each(|x| *x = uniform.sample(rng));
                check ^= std::hint::black_box(&buf)[0];
            }) * batch as f64
        };
        let rand_default = fill(&mut rand::rng());
        let rand_small = fill(&mut SmallRng::seed_from_u64(42));
        std::hint::black_box(check);
        let python = match python {
            Some(py) => {
                let args = [
                    "sampler".to_string(),
                    "--n".into(),
                    N.to_string(),
                    "--batch".into(),
                    batch.to_string(),
                    "--seed".into(),
                    "42".into(),
                    "--min-seconds".into(),
                    min.as_secs_f64().to_string(),
                ];
                let out = crate::python::run(py, &args)?;
                let v = out.first().ok_or("peers.py sampler printed nothing")?;
                Some(crate::python::num(v, "indices_per_s")?)
            }
            None => None,
        };
        rows.push(SamplerRow {
            batch,
            ours,
            rand_default,
            rand_small,
            python,
        });
    }
    Ok(rows)
}
