//! # Resuming and sharding
//!
//! Because every batch is a pure function of `(seed, step)`, a training run
//! checkpoints its loader with one number: the step.
//! [`start_step(k)`](crate::DataLoaderBuilder::start_step) rebuilds the
//! loader so that it continues bit-identically, mid-pass included.
//!
//! ```
//! use loaderx_core::{Codec, DataLoader, Dense, DenseWriter, SamplerMode};
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("x");
//! let mut w = DenseWriter::<u32>::create(&path, &[], Codec::Raw)?;
//! w.append_slice(&(0..500).collect::<Vec<u32>>(), 500)?;
//! w.close()?;
//! let build = |start: u64| -> Result<_, loaderx_core::Error> {
//!     DataLoader::builder()
//!         .stream("x", Dense::<u32>::open(&path)?)
//!         .batch_size(32)
//!         .mode(SamplerMode::Cyclic)
//!         .seed(3)
//!         .workers(2)
//!         .start_step(start)
//!         .build()
//! };
//! let ids = |b: loaderx_core::Batch| b.indices().to_vec();
//!
//! // The uninterrupted run.
//! let straight: Vec<Vec<u64>> = build(0)?.take(40).map(|b| b.map(ids)).collect::<Result<_, _>>()?;
//!
//! // A run that stops after 25 steps, saves the step, and resumes.
//! let mut first = build(0)?;
//! let mut resumed: Vec<Vec<u64>> = first.by_ref().take(25).map(|b| b.map(ids)).collect::<Result<_, _>>()?;
//! let checkpoint = first.step();             // save this with the model
//! drop(first);
//! resumed.extend(build(checkpoint)?.take(15).map(|b| b.map(ids)).collect::<Result<Vec<_>, _>>()?);
//! assert_eq!(checkpoint, 25);
//! assert_eq!(resumed, straight);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Sharding across hosts
//!
//! [`shard(rank, world_size)`](crate::DataLoaderBuilder::shard) gives each
//! rank a disjoint share of every step: each step's `B * world_size` global
//! positions are split into one block per rank, so every rank runs the same
//! number of steps, ranks are disjoint within a cycle and together cover all
//! but the remainder. Resume works the same on every rank.
//!
//! ```
//! use loaderx_core::{Sampler, SamplerMode};
//!
//! let world = 4;
//! let ranks: Vec<Sampler> = (0..world)
//!     .map(|r| Sampler::new(1000, 25, SamplerMode::Cyclic, 9)?.shard(r, world))
//!     .collect::<Result<_, _>>()?;
//! // One pass: 1000 / (25 × 4) = 10 steps, every record on exactly one rank.
//! assert_eq!(ranks[0].steps_per_epoch(), 10);
//! let mut all: Vec<u64> = ranks
//!     .iter()
//!     .flat_map(|s| (0..10).flat_map(move |k| s.indices(k)))
//!     .collect();
//! all.sort_unstable();
//! all.dedup();
//! assert_eq!(all.len(), 1000);
//! # Ok::<(), loaderx_core::Error>(())
//! ```
//!
//! On a loader the same is one builder call:
//!
//! ```
//! use loaderx_core::{Codec, DataLoader, Dense, DenseWriter};
//!
//! let dir = tempfile::tempdir()?;
//! let mut w = DenseWriter::<u8>::create(dir.path().join("x"), &[], Codec::Raw)?;
//! w.append_slice(&[0u8; 100], 100)?;
//! w.close()?;
//! let (rank, world_size) = (1, 2);
//! let loader = DataLoader::builder()
//!     .stream("x", Dense::<u8>::open(dir.path().join("x"))?)
//!     .batch_size(10)
//!     .shard(rank, world_size)            // this host's disjoint share of each step
//!     .start_step(0)                      // or the step of the last checkpoint
//!     .build()?;
//! assert_eq!(loader.steps_per_epoch(), 5);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
