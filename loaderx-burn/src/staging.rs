//! Pinned staging of uploads (effective with the `cuda` feature).
//!
//! Every batch a [`HostBatch`](crate::HostBatch) turns into a tensor goes
//! through burn's own device staging
//! ([`Device::staging`](burn::tensor::Device::staging)) before
//! `Tensor::from_data`: on burn's CUDA backend, cubecl moves the batch's
//! bytes into a buffer of its pinned host pool, so the upload reads
//! page-locked memory and runs as an asynchronous copy; on host backends
//! (the only ones compiled in without the `cuda` feature) the call does
//! nothing. Whether a batch really ended up pinned is read
//! back from its bytes ([`AllocationProperty`]) and counted, not assumed:
//! [`staging_stats`].
//!
//! The batch is gathered by the loader into its recycled host buffers first
//! and copied once into the pinned buffer (burn's staging API takes data,
//! not a size, so it cannot hand out an empty pinned buffer to gather into).

use std::sync::atomic::{AtomicU64, Ordering};

use burn::tensor::{AllocationProperty, Device, TensorData};

static PINNED: AtomicU64 = AtomicU64::new(0);
static PAGEABLE: AtomicU64 = AtomicU64::new(0);

/// How the tensors uploaded so far in this process were staged.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StagingStats {
    /// Tensors whose host data was in pinned memory when they were created.
    pub pinned: u64,
    /// Tensors created from pageable host memory (host backends, or a
    /// device whose staging declined).
    pub pageable: u64,
}

/// The process-wide staging counters of this crate's tensor uploads.
pub fn staging_stats() -> StagingStats {
    StagingStats {
        pinned: PINNED.load(Ordering::Relaxed),
        pageable: PAGEABLE.load(Ordering::Relaxed),
    }
}

/// Moves `data` into `device`'s staging memory (pinned on CUDA) and counts
/// where it ended up.
pub(crate) fn stage(data: &mut TensorData, device: &Device) {
    device.staging(std::iter::once(&mut *data));
    count(data.bytes().property());
}

fn count(property: AllocationProperty) {
    let counter = if property == AllocationProperty::Pinned {
        &PINNED
    } else {
        &PAGEABLE
    };
    counter.fetch_add(1, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_backends_leave_data_pageable_and_are_counted() {
        let before = staging_stats();
        let mut data = TensorData::new(vec![1.0f32, 2.0, 3.0], [3]);
        stage(&mut data, &Device::flex());
        assert_eq!(data.as_slice::<f32>().ok(), Some(&[1.0f32, 2.0, 3.0][..]));
        let after = staging_stats();
        assert!(after.pageable > before.pageable);
        count(AllocationProperty::Pinned);
        assert!(staging_stats().pinned > before.pinned);
    }
}
