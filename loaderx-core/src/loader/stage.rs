//! [`Stage`]: the named parts of the input pipeline the loader's recorder
//! measures on every worker and on the consumer.

/// One part of the loader's input pipeline, as its recorder times it
/// ([`LoaderStats::stages`](super::LoaderStats::stages)).
///
/// Every nanosecond of a batch on a worker, from the moment the worker
/// claims its step to the moment the batch is handed to the delivery
/// window, is counted in exactly one of the worker stages, so a batch's
/// stages add up to its wall time. The two wait stages lie outside
/// batches: [`WaitConsumer`](Stage::WaitConsumer) on the workers (the
/// window is full: the consumer is slower than they are) and
/// [`WaitBatch`](Stage::WaitBatch) on the consumer (its next batch is not
/// ready: the input pipeline is slower than the consumer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Stage {
    /// Drawing the step's record indices from the sampler.
    Sample,
    /// Locating a Ragged batch's records (its gather plan: every record's
    /// location and length checked, the buffer laid out).
    Locate,
    /// Reading the records into the batch's buffers: page-cache copies,
    /// mapped page faults, cold (`O_DIRECT`) reads, waits for the
    /// look-ahead's reads, and getting a buffer from the staging.
    Read,
    /// Fetching a remote store's stored bytes from object storage (or its
    /// block cache).
    Fetch,
    /// Decompressing compressed records (zstd) into the batch.
    Decompress,
    /// Decoding encoded images (JPEG, PNG, WebP) on the workers
    /// (`DataLoaderBuilder::augment`, feature `vision`).
    Decode,
    /// The geometric augmentation steps: crops and resizes.
    CropResize,
    /// The random horizontal flip.
    Flip,
    /// The colour jitter.
    Jitter,
    /// Writing the augmented image out: conversion to the output type,
    /// normalisation and layout.
    Convert,
    /// Packing Ragged records into rows
    /// ([`pack`](super::DataLoaderBuilder::pack)).
    Pack,
    /// Collation: the transform the loader was built with (an adapter's
    /// padding and conversion to framework tensors, or the caller's own),
    /// and what a batch's assembly costs besides the stages above.
    Collate,
    /// Copying a batch into framework memory inside the transform: an
    /// adapter's pinned host buffers and the hand-off to the device
    /// (timed by the adapters with [`Stage::time`]).
    Transfer,
    /// A worker waiting for room in the delivery window: the consumer has
    /// not taken the batches made ahead (outside any batch).
    WaitConsumer,
    /// The consumer waiting in `next` for its batch (on the consumer's
    /// thread, outside any batch).
    WaitBatch,
}

/// How many stages there are.
pub(crate) const STAGES: usize = 15;

impl Stage {
    /// Every stage, in pipeline order.
    pub const ALL: [Stage; STAGES] = [
        Stage::Sample,
        Stage::Locate,
        Stage::Read,
        Stage::Fetch,
        Stage::Decompress,
        Stage::Decode,
        Stage::CropResize,
        Stage::Flip,
        Stage::Jitter,
        Stage::Convert,
        Stage::Pack,
        Stage::Collate,
        Stage::Transfer,
        Stage::WaitConsumer,
        Stage::WaitBatch,
    ];

    /// The stage's short name (`"read"`, `"crop_resize"`...), as in the
    /// stats table, the trace file and the `tracing` spans.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Sample => "sample",
            Stage::Locate => "locate",
            Stage::Read => "read",
            Stage::Fetch => "fetch",
            Stage::Decompress => "decompress",
            Stage::Decode => "decode",
            Stage::CropResize => "crop_resize",
            Stage::Flip => "flip",
            Stage::Jitter => "jitter",
            Stage::Convert => "convert",
            Stage::Pack => "pack",
            Stage::Collate => "collate",
            Stage::Transfer => "transfer",
            Stage::WaitConsumer => "wait_consumer",
            Stage::WaitBatch => "wait_batch",
        }
    }

    /// Whether this is one of the two waits (outside any batch), rather
    /// than work a batch is made of.
    pub fn is_wait(self) -> bool {
        matches!(self, Stage::WaitConsumer | Stage::WaitBatch)
    }

    /// Runs `f`, its time counted in this stage when it runs on a loader
    /// thread making a batch (inside a transform: an adapter's copy into
    /// pinned memory or onto the device is [`Stage::Transfer`]), then goes
    /// back to the stage it was in; elsewhere it only runs `f`.
    ///
    /// ```
    /// use loaderx_core::{Codec, DataLoader, Dense, DenseWriter, Stage};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let mut w = DenseWriter::<u8>::create(dir.path().join("x"), &[8], Codec::Raw)?;
    /// w.append_slice(&[1u8; 800], 100)?;
    /// w.close()?;
    /// let mut loader = DataLoader::builder()
    ///     .stream("x", Dense::<u8>::open(dir.path().join("x"))?)
    ///     .batch_size(10)
    ///     .build_with(|batch| {
    ///         let bytes = batch.column("x").map(|c| c.bytes().to_vec()).unwrap_or_default();
    ///         // The copy a framework's tensor would make:
    ///         Ok::<_, loaderx_core::Error>(Stage::Transfer.time(|| bytes.clone()))
    ///     })?;
    /// for b in loader.by_ref().take(5) {
    ///     assert_eq!(b?.len(), 80);
    /// }
    /// let stats = loader.stats();
    /// assert_eq!(stats.stages[Stage::Transfer].count, stats.batches);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn time<R>(self, f: impl FnOnce() -> R) -> R {
        let _stage = super::lap::enter(self);
        f()
    }

    /// The stage's position in [`Stage::ALL`].
    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stage_is_listed_once_at_its_index() {
        for (i, s) in Stage::ALL.iter().enumerate() {
            assert_eq!(s.index(), i, "{s}");
        }
        let names: std::collections::BTreeSet<&str> = Stage::ALL.iter().map(|s| s.name()).collect();
        assert_eq!(names.len(), STAGES);
        assert_eq!(
            Stage::ALL.iter().filter(|s| s.is_wait()).count(),
            2,
            "two waits"
        );
    }
}
