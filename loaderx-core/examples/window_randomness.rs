//! What the windowed order costs in randomness: [`OrderStats`] of one pass
//! of 2^20 records in batches of 256, runs of 1024 records (4 MiB of 4 KB
//! records), for a full permutation (`Cyclic`), `Windowed` with a few
//! block and window sizes, and the store's order (`Sequential`), beside
//! what a uniformly random permutation scores in expectation. Prints the
//! Markdown table of the sampler guide. Run:
//! `cargo run -p loaderx-core --release --example window_randomness`

use loaderx_core::{Error, OrderStats, Sampler, SamplerMode};

const RECORDS: u64 = 1 << 20;
const BATCH: usize = 256;
const RUN: u64 = 1024;

fn main() -> Result<(), Error> {
    let row = |name: &str, s: &OrderStats| {
        println!(
            "| {name} | {:.3} | {:.3} | {:.4} | {:.1} |",
            s.displacement, s.correlation, s.same_run_pairs, s.runs_per_batch
        );
    };
    println!(
        "| order | displacement | correlation | same-run pairs | runs per batch |\n\
         |---|---:|---:|---:|---:|"
    );
    row(
        "uniform permutation (expected)",
        &OrderStats::uniform(RECORDS, BATCH, RUN),
    );
    let mut modes = vec![("`Cyclic`".to_string(), SamplerMode::Cyclic)];
    for (block, window) in [
        (256, 16),
        (256, 64),
        (1024, 8),
        (1024, 16),
        (1024, 64),
        (4096, 16),
    ] {
        modes.push((
            format!("`Windowed {{ block: {block}, window: {window} }}`"),
            SamplerMode::Windowed { block, window },
        ));
    }
    modes.push(("`Sequential`".to_string(), SamplerMode::Sequential));
    for (name, mode) in modes {
        let s = Sampler::builder(RECORDS, BATCH)
            .mode(mode)
            .seed(42)
            .drop_last(false)
            .build()?;
        row(&name, &OrderStats::of_pass(&s, 0, RUN)?);
    }
    Ok(())
}
