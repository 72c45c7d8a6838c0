//! A guide to `loaderx-core`, in the manner of `csv`'s tutorial and
//! cookbook: each chapter is a module with no code of its own, and every
//! example in it runs as a doctest (`cargo test --doc -p loaderx-core`),
//! creating its stores in a temporary directory.
//!
//! 1. [`stores`]: writing and reading Dense and Ragged stores, typed and
//!    untyped, into new arrays or into your own memory.
//! 2. [`codecs`]: `raw`, `zstd` and `zstd_dict`, training a dictionary, and
//!    the options a store is created with.
//! 3. [`sampler`]: batch indices as a pure function of `(seed, step)`.
//! 4. [`loader`]: the ordered, multi-threaded [`DataLoader`](crate::DataLoader),
//!    transforms, finite passes and evaluation.
//! 5. [`resume`]: resuming a run exactly and sharding it across hosts.
//!
//! The on-disk format is in the repository's `docs/format.md`, the
//! reliability evidence in `docs/reliability.md`, and the framework
//! adapters (`loaderx-burn`, `loaderx-candle`, `loaderx-tch`) build on the
//! loader described here.

pub mod codecs;
pub mod loader;
pub mod resume;
pub mod sampler;
pub mod stores;
