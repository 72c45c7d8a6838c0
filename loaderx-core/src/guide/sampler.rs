//! # The sampler
//!
//! A [`Sampler`](crate::Sampler) produces the record indices of every batch
//! as a pure function of `(seed, step)`: there is no hidden state to save,
//! [`seek`](crate::Sampler::seek) is O(1), and two samplers built alike agree
//! on every step.
//!
//! ```
//! use loaderx_core::{Sampler, SamplerMode};
//!
//! let mut s = Sampler::new(60_000, 256, SamplerMode::Cyclic, 42)?;
//! let first: Vec<u64> = s.next_batch().to_vec();   // step 0
//! assert_eq!(first.len(), 256);
//! s.seek(1_000);                                   // jump anywhere, no replay
//! assert_eq!(s.step(), 1_000);
//! assert_eq!(s.steps_per_epoch(), 234);            // 60000 / 256, remainder dropped
//! // Any step, without moving the sampler:
//! assert_eq!(s.indices(0), first);
//! # Ok::<(), loaderx_core::Error>(())
//! ```
//!
//! ## Modes
//!
//! - [`Sequential`](crate::SamplerMode::Sequential): a sliding window over
//!   the circular index space.
//! - [`Iid`](crate::SamplerMode::Iid): uniform with replacement, unbiased
//!   (Lemire's method with rejection).
//! - [`Cyclic`](crate::SamplerMode::Cyclic): without replacement; every
//!   cycle is a fresh pseudo-random permutation computed statelessly (a keyed
//!   Feistel network with cycle-walking, O(1) memory); every batch is full
//!   and the dropped remainder changes from cycle to cycle.
//!
//! ```
//! use loaderx_core::{Sampler, SamplerMode};
//!
//! // One cyclic pass visits distinct records.
//! let s = Sampler::new(1000, 100, SamplerMode::Cyclic, 7)?;
//! let mut seen: Vec<u64> = (0..s.steps_per_epoch()).flat_map(|k| s.indices(k)).collect();
//! seen.sort_unstable();
//! seen.dedup();
//! assert_eq!(seen.len(), 1000);
//! # Ok::<(), loaderx_core::Error>(())
//! ```
//!
//! ## Evaluation passes
//!
//! With `drop_last(false)` on [`Sampler::builder`](crate::Sampler::builder) every
//! record is visited exactly once per pass and the last batch is partial:
//!
//! ```
//! use loaderx_core::{Sampler, SamplerMode};
//!
//! let eval = Sampler::builder(10_000, 999)
//!     .mode(SamplerMode::Sequential)
//!     .drop_last(false)
//!     .build()?;
//! assert_eq!(eval.steps_per_epoch(), 11);          // 10 × 999 + 10
//! assert_eq!(eval.batch_len(10), 10);
//! # Ok::<(), loaderx_core::Error>(())
//! ```
//!
//! ## Slow media: the windowed order
//!
//! A shuffled pass makes every record a random read. From the page cache
//! or a fast NVMe drive that is fine; from a spinning disk, a network file
//! system, or a store much larger than memory on a drive that serves long
//! reads far faster than short ones (and reads ahead megabytes around each
//! page it faults in), it is the bottleneck.
//! [`Windowed`](crate::SamplerMode::Windowed)`{ block, window }` reads
//! long runs instead: each pass visits blocks of `block` consecutive
//! records in a fresh random order and shuffles the records within each
//! window of `window` consecutive blocks of that order. Everything else is
//! `Cyclic`'s: the same steps, every record once per pass, passes that
//! differ, resume at a step or a record position, ranks with disjoint
//! shares of each global batch, and global batches that do not depend on
//! the world size (see the [`Sampler`](crate::Sampler#windowed-order-for-slow-media)
//! docs).
//!
//! ```
//! use loaderx_core::{Sampler, SamplerMode};
//!
//! // Records of about 16 kB: blocks of 256 records (4 MiB), 16 per window.
//! let mode = SamplerMode::windowed(16_384);
//! assert_eq!(mode, SamplerMode::Windowed { block: 256, window: 16 });
//! assert_eq!("windowed:256:16".parse::<SamplerMode>()?, mode);
//! let ranks: Vec<Sampler> = (0..2)
//!     .map(|r| Sampler::builder(100_000, 64).mode(mode).seed(3).shard(r, 2).build())
//!     .collect::<Result<_, _>>()?;
//! // The two ranks' shares of step 0 are the two halves of the global batch.
//! let one = Sampler::builder(100_000, 128).mode(mode).seed(3).build()?;
//! let global: Vec<u64> = ranks.iter().flat_map(|s| s.indices(0)).collect();
//! assert_eq!(global, one.indices(0));
//! # Ok::<(), loaderx_core::Error>(())
//! ```
//!
//! **Choosing the sizes.** `block × record size` ≈ 1–8 MiB, a read the drive
//! serves at its sequential speed ([`SamplerMode::windowed`](crate::SamplerMode::windowed)
//! takes the record size and picks 4 MiB); `window` ≈ 8–64 blocks. A batch
//! draws from about `window` places of the store, and `window × block ×
//! record size` bytes are read at once (64 MiB with the defaults), which
//! should fit the page cache or the remote block cache comfortably.
//!
//! **What it costs.** [`OrderStats`](crate::OrderStats) measures a pass:
//! how far records travel from their place in the store (mean
//! `|position − record| / n`), the correlation of position and record, the
//! share of a batch's pairs of records that lie in the same run of 1024
//! consecutive records of the store (4 MiB of 4 KB records), and how many
//! such runs a batch draws from. One pass of 2^20 records in batches of 256
//! (`cargo run -p loaderx-core --release --example window_randomness`):
//!
//! | order | displacement | correlation | same-run pairs | runs per batch |
//! |---|---:|---:|---:|---:|
//! | uniform permutation (expected) | 0.333 | 0.000 | 0.0010 | 226.6 |
//! | `Cyclic` | 0.333 | 0.001 | 0.0010 | 226.6 |
//! | `Windowed { block: 256, window: 16 }` | 0.335 | -0.008 | 0.0633 | 15.9 |
//! | `Windowed { block: 256, window: 64 }` | 0.335 | -0.008 | 0.0164 | 61.3 |
//! | `Windowed { block: 1024, window: 8 }` | 0.334 | 0.001 | 0.1249 | 8.0 |
//! | `Windowed { block: 1024, window: 16 }` | 0.334 | 0.001 | 0.0625 | 16.0 |
//! | `Windowed { block: 1024, window: 64 }` | 0.335 | -0.000 | 0.0156 | 62.9 |
//! | `Windowed { block: 4096, window: 16 }` | 0.322 | 0.060 | 0.0156 | 62.9 |
//! | `Sequential` | 0.000 | 1.000 | 1.0000 | 1.0 |
//!
//! Blocks go anywhere in the pass, so records travel as far as in a full
//! shuffle and position says nothing of the record (the first two
//! columns). The cost is within a batch: it draws from about `window`
//! regions of the store (more when a block spans several runs), so two of
//! its records are store neighbours about once in `window` pairs (once in
//! `window × block / 1024` for blocks larger than a run) instead of once in
//! a thousand. That matters as much as neighbours in the store are alike:
//! nothing for a store written in shuffled order, a great deal for one
//! written class by class or document by document — shuffle such a store
//! once when writing it, or raise `window`. Use the windowed order when the
//! reads, not the model, bound a step: on spinning disks, network file
//! systems, and stores larger than memory on drives that prefer long reads;
//! keep `Cyclic` for stores in memory or on fast NVMe.
//!
//! FFCV's quasi-random order is the peer: pages of about 8 MB in a
//! shuffled order, records drawn from a small buffer of pages at a time,
//! the whole epoch's order generated up front by a seeded generator, and
//! refused for distributed training. Here the order is a pure function of
//! `(seed, step)`, computed per batch in O(batch) without any per-epoch
//! array, so it also shards across ranks (each rank a disjoint share of
//! every global batch, all ranks reading the same window), resumes exactly
//! at any step or record position mid-pass, and resumes on another number
//! of ranks with the same global batches.
//!
//! Sharding a sampler across ranks is in [`resume`](super::resume).
