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

use burn::tensor::{AllocationProperty, Device, TensorData};
use loaderx_core::adapter::StagingCounter;
pub use loaderx_core::adapter::StagingStats;

static UPLOADS: StagingCounter = StagingCounter::new();

/// The process-wide staging counts of this crate's tensor uploads: pinned
/// when burn's device staging moved the data into pinned memory, pageable
/// otherwise (host backends, or a device whose staging declined).
pub fn staging_stats() -> StagingStats {
    UPLOADS.stats()
}

/// Moves `data` into `device`'s staging memory (pinned on CUDA) and counts
/// where it ended up.
pub(crate) fn stage(data: &mut TensorData, device: &Device) {
    device.staging(std::iter::once(&mut *data));
    count(data.bytes().property());
}

fn count(property: AllocationProperty) {
    UPLOADS.record(property == AllocationProperty::Pinned);
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
