//! Sequences: record lengths, length-bucketed batches and packing.
//!
//! Training on Ragged token stores pads every batch to its longest record;
//! with lengths spread from tens to hundreds of tokens most of a random
//! batch is padding. This module holds the two standard answers, both
//! deterministic and resumable like everything else in the loader:
//!
//! - [`LengthIndex`]: every record's length, from the location table (no
//!   decompression for rank-1 records), cached per open store
//!   ([`DynRagged::lengths`](crate::DynRagged::lengths)) and optionally
//!   persisted in a sidecar file next to the store.
//! - Length-aware sampling: [`SamplerMode::Bucketed`](crate::SamplerMode::Bucketed)
//!   (batches of `B` records of similar length) and
//!   [`SamplerMode::TokenBudget`](crate::SamplerMode::TokenBudget) (as many
//!   records per batch as fit a token budget after padding); see the
//!   [sampler docs](crate::Sampler#length-aware-modes).
//! - Packing: [`pack_records`] / [`pack_batch`] and the loader option
//!   [`DataLoaderBuilder::pack`](crate::DataLoaderBuilder::pack) place a
//!   step's records into `rows × max_len` tokens (first-fit decreasing)
//!   with segment ids and positions, as Dense streams every adapter turns
//!   into tensors.
//!
//! ```
//! use loaderx_core::sequence::PackOptions;
//! use loaderx_core::{Codec, DataLoader, Ragged, RaggedWriter, SamplerMode};
//!
//! let dir = tempfile::tempdir()?;
//! let mut w = RaggedWriter::<u32>::create(dir.path().join("tok"), 1, Codec::Zstd)?;
//! w.append((0..1000u32).map(|i| vec![i; 1 + (i as usize * 7919) % 64]))?;
//! w.close()?;
//! let tok = Ragged::<u32>::open(dir.path().join("tok"))?;
//!
//! // Packed rows of 128 tokens from bucketed batches of 32 records.
//! let mut loader = DataLoader::builder()
//!     .stream("tok", tok)
//!     .batch_size(32)
//!     .mode(SamplerMode::Bucketed { window: 8 })
//!     .pack("tok", PackOptions::new(128))
//!     .epochs(1)
//!     .build()?;
//! let batch = loader.next().unwrap()?;
//! let tokens = batch.dense::<u32>("tok")?;                 // (rows, 128)
//! let segments = batch.dense::<i32>("tok.segment_ids")?;   // 0 = padding
//! let positions = batch.dense::<i32>("tok.positions")?;    // restart per record
//! assert_eq!(tokens.shape()[1], 128);
//! assert_eq!(segments.shape(), tokens.shape());
//! assert_eq!(positions[[0, 0]], 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod lengths;
mod pack;

pub use lengths::LengthIndex;
pub use pack::{
    LongRecords, POSITIONS, PackOptions, Packed, PackedSegment, SEGMENT_IDS, SEGMENTS, pack_batch,
    pack_column, pack_records,
};
