//! `loaderx-bench`: the benchmark suite. Builds the workloads, runs every
//! contender in the same run and prints markdown tables with ratio columns
//! (progress on stderr). See `bench/README.md` for the
//! method and the latest tables.
//!
//! ```text
//! loaderx-bench [--quick] [--python PY] [--sections stores,small,sampler,sequence,loader,loader2,remote,scale,vision,profile,stream]
//!               [--workloads a,b,c,d,e] [--min-seconds 2] [--dir DIR]
//! ```

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use loaderx_bench::{Args, Child, cold, loader, suite, vision};

fn main() -> ExitCode {
    let args = Args::parse();
    let result = match &args.command {
        Some(Child::LoaderChild {
            which,
            store,
            batch,
            workers,
            prefetch,
            seconds,
            label,
        }) => loader::child(
            which,
            store,
            label.as_deref(),
            loader::LoaderConfig {
                batch: *batch,
                workers: *workers,
                prefetch: *prefetch,
                min: Duration::from_secs_f64(*seconds),
            },
        ),
        Some(Child::ColdChild {
            store,
            batch,
            workers,
            order,
            read_mode,
            prefetch_bytes,
            seconds,
        }) => read_mode
            .as_deref()
            .map(cold::parse_read_mode)
            .transpose()
            .and_then(|read_mode| {
                cold::child(
                    store,
                    &cold::ChildConfig {
                        batch: *batch,
                        workers: *workers,
                        order: order.clone(),
                        read_mode,
                        prefetch_bytes: *prefetch_bytes,
                        seconds: *seconds,
                    },
                )
            }),
        Some(Child::VisionChild {
            which,
            split,
            pipeline,
            workers,
            seconds,
        }) => vision::Pipe::parse(pipeline)
            .and_then(|pipe| vision::child(which, split, pipe, *workers, *seconds)),
        Some(Child::StreamChild {
            location,
            cache,
            start,
            steps,
            batch,
            window,
        }) => loaderx_bench::stream::child(location, cache, *start, *steps, *batch, *window),
        None => suite::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("loaderx-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
