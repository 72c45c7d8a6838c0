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
//! Sharding a sampler across ranks is in [`resume`](super::resume).
