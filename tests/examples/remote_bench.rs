//! The `remote` section of `loaderx-bench` on its own: workloads (b) and (d)
//! read from the local store and from an S3 server (moto) on loopback, cold,
//! warm and without a cache. Same code as the suite's section (the modules
//! are `loaderx-bench`'s, included here), without building the suite's
//! other peers.
//!
//! ```text
//! LOADERX_PYTHON=~/.cache/loaderx/venv/bin/python \
//!     cargo run --release -p loaderx-tests --example remote_bench \
//!     [-- [--quick] [--min-seconds S]]
//! ```

use std::time::Duration;

#[allow(unreachable_pub)]
#[path = "../../bench/src/remote.rs"]
mod remote;
#[allow(dead_code, unreachable_pub)]
#[path = "../../bench/src/report.rs"]
mod report;
#[allow(dead_code, unreachable_pub)]
#[path = "../../bench/src/workload.rs"]
mod workload;

fn main() -> Result<(), remote::Error> {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let scale = if quick { 100 } else { 1 };
    // `--min-seconds S`: how long the local and warm rows repeat the epoch.
    let min_seconds = match args.iter().position(|a| a == "--min-seconds") {
        Some(k) => args
            .get(k + 1)
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s > 0.0)
            .ok_or("--min-seconds needs a positive number of seconds")?,
        None if quick => 0.05,
        None => 2.0,
    };
    let min = Duration::from_secs_f64(min_seconds);
    let images = workload::fashion_images(!quick)?;
    let workloads: Vec<_> = ["b", "d"]
        .into_iter()
        .map(|k| workload::build(k, &images, scale))
        .collect();
    let dir = tempfile::tempdir()?;
    let mut targets = Vec::new();
    let out = remote::section(
        std::env::var_os("LOADERX_PYTHON").is_some(),
        &workloads,
        dir.path(),
        min,
        &mut targets,
        &|m| eprintln!("{m}"),
    )?;
    println!("{out}#### Targets\n\n{}", report::targets(&targets));
    Ok(())
}
