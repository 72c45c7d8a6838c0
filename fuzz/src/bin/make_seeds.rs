//! Writes the seed corpora: `make_seeds DIR` creates `DIR/<target>/<name>`.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: make_seeds DIR");
        return ExitCode::from(2);
    };
    match loaderx_fuzz::seeds::write_all(&dir) {
        Ok(n) => {
            println!("wrote {n} seeds under {}", dir.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("make_seeds: {e}");
            ExitCode::FAILURE
        }
    }
}
