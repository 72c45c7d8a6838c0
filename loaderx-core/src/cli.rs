//! The `loaderx` command-line tool (feature `cli`).
//!
//! - `loaderx info STORE`: contract, element type, shape or rank, codec,
//!   shards, length, logical and on-disk bytes;
//! - `loaderx digest STORE`: `<sha256-hex>  <length>`, the canonical digest;
//! - `loaderx verify STORE`: reads and decodes every record; exits non-zero
//!   with a one-line message naming the problem and the record.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::codec::Codec;
use crate::error::Error;
use crate::store::Store;

/// loaderx: Zrecord stores for Rust training loops.
#[derive(Debug, Parser)]
#[command(name = "loaderx", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// A `loaderx` subcommand.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print a store's schema, codec, shards, length and sizes.
    Info {
        /// Store directory.
        store: PathBuf,
    },
    /// Print the canonical digest `<sha256-hex>  <length>` of a store.
    Digest {
        /// Store directory.
        store: PathBuf,
    },
    /// Read and decode every record; exit non-zero on the first problem.
    Verify {
        /// Store directory.
        store: PathBuf,
    },
    /// Convert a dataset to Zrecord stores under OUT/<split>/<column>.
    #[command(subcommand)]
    Convert(Convert),
}

/// A `loaderx convert` source.
#[derive(Debug, Subcommand)]
pub enum Convert {
    /// MNIST-format IDX files: DIR holds train-images-idx3-ubyte,
    /// train-labels-idx1-ubyte, t10k-images-idx3-ubyte and
    /// t10k-labels-idx1-ubyte, each optionally gzipped.
    Idx {
        /// Directory with the four IDX files.
        dir: PathBuf,
        /// Output root (must not exist).
        out: PathBuf,
        /// raw, zstd or zstd_dict.
        #[arg(long, default_value = "zstd")]
        codec: Codec,
        /// Payload shards per store (1..=255).
        #[arg(long, default_value_t = 4)]
        shards: usize,
    },
}

/// Runs the tool with the process arguments.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli.command) {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("loaderx: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs one command and returns what it prints.
pub fn run(command: &Command) -> Result<String, Error> {
    match command {
        Command::Info { store } => info(&Store::open(store)?),
        Command::Digest { store } => Ok(crate::digest::digest(&Store::open(store)?)?.to_string()),
        Command::Verify { store } => {
            let s = Store::open(store)?;
            s.for_each_record(|_, _, _| Ok(()))?;
            Ok(format!("ok: {} records verified", s.len()))
        }
        Command::Convert(Convert::Idx {
            dir,
            out,
            codec,
            shards,
        }) => {
            let summary = crate::convert::idx::convert_idx_dir(dir, out, *codec, *shards)?;
            let splits: Vec<String> = summary
                .splits
                .iter()
                .map(|s| format!("{}: {} records of {:?}", s.name, s.records, s.image_shape))
                .collect();
            Ok(format!(
                "wrote {} ({})",
                summary.root.display(),
                splits.join(", ")
            ))
        }
    }
}

fn info(store: &Store) -> Result<String, Error> {
    let shape = match store {
        Store::Dense(s) => format!("item_shape: {:?}", s.item_shape()),
        Store::Ragged(s) => format!("ndim: {}", s.ndim()),
    };
    let logical = store.logical_bytes()?;
    let stored = store.stored_bytes();
    Ok(format!(
        "path: {}\nclass: {}\ndtype: {} ({})\n{shape}\ncodec: {}\ndata_shards: {}\nlength: {}\nlogical_bytes: {logical}\nstored_bytes: {stored}\nratio: {:.3}",
        store.path().display(),
        store.kind(),
        store.dtype(),
        store.dtype().numpy_str(),
        store.codec(),
        store.data_shards(),
        store.len(),
        if stored == 0 {
            0.0
        } else {
            logical as f64 / stored as f64
        },
    ))
}
