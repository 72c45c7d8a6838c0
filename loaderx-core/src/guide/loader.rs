//! # The loader
//!
//! A [`DataLoader`](crate::DataLoader) gathers named streams (Dense and
//! Ragged stores, mixed) at the indices its sampler gives for each step, on
//! worker threads, runs an optional transform there, and hands the results
//! to you **in step order** whatever the number of workers: batch `k` is
//! always the sampler's step `k`. It is endless unless asked for a number of
//! passes, and at most `workers + prefetch` batches are in flight, which
//! bounds its memory.
//!
//! ```
//! use loaderx_core::{Codec, DataLoader, Dense, DenseWriter, SamplerMode};
//! use ndarray::{Array1, Array3};
//!
//! let dir = tempfile::tempdir()?;
//! let (image, label) = (dir.path().join("image"), dir.path().join("label"));
//! let mut w = DenseWriter::<u8>::create(&image, &[28, 28], Codec::Zstd)?;
//! w.append(&Array3::<u8>::from_shape_fn((600, 28, 28), |(i, _, _)| (i % 10) as u8))?;
//! w.close()?;
//! let mut w = DenseWriter::<u8>::create(&label, &[], Codec::Raw)?;
//! w.append(&Array1::<u8>::from_shape_fn(600, |i| (i % 10) as u8))?;
//! w.close()?;
//!
//! let mut loader = DataLoader::builder()
//!     .stream("image", Dense::<u8>::open(&image)?)
//!     .stream("label", Dense::<u8>::open(&label)?)
//!     .batch_size(128)
//!     .mode(SamplerMode::Cyclic)         // a fresh permutation every pass
//!     .seed(42)
//!     .workers(4)                        // gather + transform threads
//!     .prefetch(2)                       // at most workers + prefetch batches in flight
//!     .build()?;
//! let batch = loader.next().unwrap()?;
//! let images = batch.dense::<u8>("image")?;   // ndarray view, shape (128, 28, 28)
//! let labels = batch.dense::<u8>("label")?;   // shape (128,)
//! assert_eq!(images.shape(), &[128, 28, 28]);
//! assert_eq!(images[[5, 0, 0]], labels[5]);   // the streams line up record by record
//! assert_eq!((batch.step(), loader.step()), (0, 1));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Transforms on the workers
//!
//! [`build_with`](crate::DataLoaderBuilder::build_with) runs your function
//! on the worker threads (it must be thread-safe), so decoding and
//! normalisation stay off the training thread. Its errors, and its panics,
//! arrive as `Err` at their step, after which the iterator ends:
//!
//! ```
//! use loaderx_core::{Codec, DataLoader, Dense, DenseWriter};
//!
//! let dir = tempfile::tempdir()?;
//! let mut w = DenseWriter::<u8>::create(dir.path().join("x"), &[2], Codec::Raw)?;
//! w.append_slice(&(0..200).map(|v| v as u8).collect::<Vec<_>>(), 100)?;
//! w.close()?;
//!
//! let mut loader = DataLoader::builder()
//!     .stream("x", Dense::<u8>::open(dir.path().join("x"))?)
//!     .batch_size(10)
//!     .workers(2)
//!     .build_with(|batch| {
//!         let x = batch.dense::<u8>("x")?.mapv(|v| f32::from(v) / 255.0);
//!         Ok::<_, loaderx_core::Error>((batch.step(), x))
//!     })?;
//! let (step, x) = loader.next().unwrap()?;
//! assert_eq!((step, x.shape()), (0, &[10, 2][..]));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Finite passes and evaluation
//!
//! `.epochs(n)` ends the loader after `n` passes, and `.drop_last(false)`
//! delivers every record exactly once per pass with a partial last batch,
//! so an evaluation pass works with any batch size. Each
//! [`Batch`](crate::Batch) knows its `epoch()` and `step_in_epoch()`.
//!
//! ```
//! use loaderx_core::{Codec, DataLoader, Dense, DenseWriter, SamplerMode};
//!
//! let dir = tempfile::tempdir()?;
//! let mut w = DenseWriter::<u16>::create(dir.path().join("x"), &[], Codec::Raw)?;
//! w.append_slice(&(0..1000).collect::<Vec<u16>>(), 1000)?;
//! w.close()?;
//!
//! let eval = DataLoader::builder()
//!     .stream("x", Dense::<u16>::open(dir.path().join("x"))?)
//!     .batch_size(99)                     // 1000 = 10 × 99 + 10: 11 batches
//!     .mode(SamplerMode::Sequential)
//!     .drop_last(false)
//!     .epochs(1)
//!     .build()?;
//! assert_eq!(eval.steps_per_epoch(), 11);
//! let mut seen = Vec::new();
//! for batch in eval {
//!     let batch = batch?;
//!     seen.extend(batch.dense::<u16>("x")?.iter().copied());
//! }
//! assert_eq!(seen, (0..1000).collect::<Vec<u16>>());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A training framework that asks for one epoch at a time gets an
//! [`EpochLoader`](crate::adapter::EpochLoader) from
//! [`build_epochs`](crate::DataLoaderBuilder::build_epochs): each `iter()`
//! is the next pass, a `start_step` inside an epoch resumes it exactly, and
//! [`slice`](crate::adapter::EpochLoader::slice) cuts an epoch at whole batches (for
//! multi-device training); `loaderx-burn`'s `BurnDataLoader` wraps it.
//!
//! ## Ragged streams
//!
//! A Ragged stream's column gives the records one by one, or padded to the
//! longest record with per-record lengths and a mask, as the framework
//! adapters hand them over:
//!
//! ```
//! use loaderx_core::adapter::PadValue;
//! use loaderx_core::{Codec, DataLoader, Ragged, RaggedWriter, SamplerMode};
//!
//! let dir = tempfile::tempdir()?;
//! let mut w = RaggedWriter::<u32>::create(dir.path().join("text"), 1, Codec::Zstd)?;
//! w.append((0..64u32).map(|i| vec![i; 1 + i as usize % 7]))?;
//! w.close()?;
//!
//! let mut loader = DataLoader::builder()
//!     .stream("text", Ragged::<u32>::open(dir.path().join("text"))?)
//!     .batch_size(8)
//!     .mode(SamplerMode::Sequential)
//!     .build()?;
//! let batch = loader.next().unwrap()?;
//! let records = batch.ragged::<u32>("text")?;               // 8 views
//! assert_eq!(records[3].as_slice(), Some(&[3u32; 4][..]));
//! let tokens = batch.column("text").unwrap().padded(PadValue::of(0u32))?;
//! assert_eq!(tokens.values.shape(), &[8, 7]);               // (B, longest)
//! assert_eq!(tokens.lengths.shape(), &[8, 1]);              // i64 lengths
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Where each stream's batch is gathered (pinned host memory, a framework
//! tensor's storage) is decided by a [`Staging`](crate::adapter::Staging),
//! whose buffer type the batches then hold
//! ([`DataLoaderBuilder::staging`](crate::DataLoaderBuilder::staging); the
//! adapters choose theirs); by default a recycling
//! [`BufferPool`](crate::adapter::BufferPool) is used, so the steady state
//! allocates nothing. Dropping the loader stops and joins its threads.
//!
//! Several devices in one process take placement views of each step's
//! batch: [`build_views`](crate::DataLoaderBuilder::build_views) splits the
//! global batch into contiguous equal parts
//! ([`view_range`](crate::view_range)), each gathered into its own buffers,
//! and [`view(i, n)`](crate::DataLoaderBuilder::view) makes a loader of one
//! part; resuming and [`shard`](crate::DataLoaderBuilder::shard) compose
//! with both.
