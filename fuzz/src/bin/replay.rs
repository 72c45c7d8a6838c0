//! Runs one target over input files, e.g. a crash AFL++ saved:
//! `replay sampler fuzz/crashes/sampler/id:000000*`.

use std::process::ExitCode;

use loaderx_fuzz::targets;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let target = args.next().unwrap_or_default();
    let run: fn(&[u8]) = match target.as_str() {
        "store" => targets::store,
        "ragged_record" => targets::ragged_record,
        "schema" => targets::schema,
        "sampler" => targets::sampler,
        "mixture" => targets::mixture,
        "manifest" => targets::manifest,
        "idx" => loaderx_fuzz::convert::idx,
        "image" => loaderx_fuzz::convert::image,
        "audio" => loaderx_fuzz::convert::audio,
        "card" => loaderx_fuzz::hf::card,
        "parquet" => loaderx_fuzz::hf::parquet,
        "jsonl" => loaderx_fuzz::formats::jsonl,
        "npy" => loaderx_fuzz::formats::npy,
        "webdataset" => loaderx_fuzz::formats::webdataset,
        "jpeg_crop" => loaderx_fuzz::formats::jpeg_crop,
        _ => {
            eprintln!(
                "usage: replay store|ragged_record|schema|sampler|mixture|manifest|idx|image|audio|card|parquet|jsonl|npy|webdataset|jpeg_crop FILE..."
            );
            return ExitCode::from(2);
        }
    };
    let mut failed = 0;
    for file in args {
        let bytes = match std::fs::read(&file) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("{file}: {e}");
                return ExitCode::FAILURE;
            }
        };
        if std::panic::catch_unwind(|| run(&bytes)).is_err() {
            eprintln!("{file}: panicked");
            failed += 1;
        }
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
