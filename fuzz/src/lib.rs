//! Fuzz targets for `loaderx-core`, and in [`hf`] for the Hugging Face
//! readers of `loaderx-convert` (the dataset card, parquet files).
//!
//! Each target in [`targets`] takes arbitrary bytes and drives one piece of
//! the library that reads untrusted input: opening and gathering from a whole
//! store ([`targets::store`]), the shape header of a Ragged record
//! ([`targets::ragged_record`]), the MsgPack schema ([`targets::schema`]),
//! a multi-part dataset's `dataset.json` ([`targets::manifest`]), the
//! sampler's parameters ([`targets::sampler`]) and weighted mixtures with
//! their shards, resume positions and placement views
//! ([`targets::mixture`]); [`convert`] holds the
//! converters' targets (IDX headers, images, audio), and [`formats`] those
//! of the users' files (JSON lines, `.npy`/`.npz`, WebDataset shards) and
//! of crop-first JPEG decoding. A target returns quietly
//! when the library reports an error; it panics only when the library panics
//! or breaks one of its own promises (a decoded schema that does not encode
//! back to itself, a sampled index out of range, ...), which is what the
//! fuzzer reports as a crash.
//!
//! The same functions run three ways:
//!
//! - under AFL++ through `cargo afl` (the `fuzz_*` binaries, feature `afl`;
//!   `scripts/fuzz` builds and runs them and refreshes the corpora),
//! - over the committed corpora in `fuzz/corpus/<target>/` and the inputs
//!   that once crashed a target, `fuzz/regressions/<target>/`, by this
//!   crate's test `replay`, which `cargo test` runs on every build,
//! - by hand with the `replay` binary, e.g. on a crash file AFL++ saved:
//!   `cargo run -p loaderx-fuzz --bin replay -- sampler fuzz/crashes/sampler/*`.
//!   Once fixed, a crash input moves to `fuzz/regressions/<target>/`.
//!
//! ```
//! // A store input whose meta.zr is all zeros: not published, an error, no panic.
//! let input = loaderx_fuzz::input::StoreInput {
//!     meta: vec![0; 4096],
//!     data: vec![Vec::new()],
//!     dict: None,
//! };
//! loaderx_fuzz::targets::store(&input.encode());
//! ```

pub mod convert;
pub mod formats;
pub mod hf;
pub mod input;
pub mod seeds;
pub mod targets;
