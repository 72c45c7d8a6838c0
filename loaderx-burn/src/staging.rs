//! Pinned staging of uploads (effective with the `cuda` or `tch` feature).
//!
//! Every batch a [`HostBatch`](crate::HostBatch) turns into a tensor goes
//! through [`upload`]:
//!
//! - **burn's CUDA backend** (feature `cuda`): burn's own device staging
//!   ([`Device::staging`](burn::tensor::Device::staging)) runs before
//!   `Tensor::from_data`: cubecl moves the batch's bytes into a buffer of
//!   its pinned host pool, so the upload reads page-locked memory and runs
//!   as an asynchronous copy.
//! - **burn's LibTorch backend on CUDA** (feature `tch`): burn-tch declines
//!   that staging, and its own upload copies the bytes into a fresh
//!   pageable CPU tensor and then copies that to the GPU, waiting for it.
//!   Here the batch is converted to the dtype `Tensor::from_data` would
//!   give it, copied once into a page-locked CPU tensor and sent to the GPU
//!   with a non-blocking copy, as loaderx-tch does; the tensor is handed to
//!   burn as the LibTorch backend's own primitive
//!   ([`Tensor::from_primitive`]). A dtype libtorch has no kind for takes
//!   burn's path.
//! - **host backends** (`flex`, LibTorch on the CPU): staging does nothing.
//!
//! Whether a batch really ended up pinned is read back (from its bytes'
//! [`AllocationProperty`] for cubecl, from libtorch's `is_pinned` for
//! LibTorch) and counted, not assumed: [`staging_stats`].
//!
//! The batch is gathered by the loader into its recycled host buffers first
//! and copied once into the pinned buffer (burn's staging API takes data,
//! not a size, so it cannot hand out an empty pinned buffer to gather into).

use burn::tensor::kind::{Basic, TensorKind};
use burn::tensor::{AllocationProperty, Device, Tensor, TensorData};
use loaderx_core::adapter::StagingCounter;
pub use loaderx_core::adapter::StagingStats;

static UPLOADS: StagingCounter = StagingCounter::new();

/// The process-wide staging counts of this crate's tensor uploads: pinned
/// when burn's device staging moved the data into pinned memory, pageable
/// otherwise (host backends, or a device whose staging declined).
pub fn staging_stats() -> StagingStats {
    UPLOADS.stats()
}

/// `data` as a rank-`D` tensor of kind `K` on `device`, staged in pinned
/// memory where the backend allows it (see the module docs); the same
/// tensor, dtype included, as `Tensor::from_data(data, device)`.
pub(crate) fn upload<const D: usize, K: Basic + TensorKind>(
    data: TensorData,
    device: &Device,
) -> Tensor<D, K> {
    // The hand-off into the backend's memory: a stage of its own in the
    // loader's stats when it runs on a worker.
    loaderx_core::Stage::Transfer.time(|| {
        #[cfg(feature = "tch")]
        let data = match libtorch::upload::<D, K>(data, device) {
            Ok(tensor) => return tensor,
            Err(data) => data,
        };
        let mut data = data;
        stage(&mut data, device);
        Tensor::from_data(data, device)
    })
}

/// Moves `data` into `device`'s staging memory (pinned on burn's CUDA
/// backend) and counts where it ended up.
fn stage(data: &mut TensorData, device: &Device) {
    device.staging(std::iter::once(&mut *data));
    count(data.bytes().property());
}

fn count(property: AllocationProperty) {
    UPLOADS.record(property == AllocationProperty::Pinned);
}

/// Uploads to burn's LibTorch backend on a CUDA device. burn 0.22 marks
/// burn-tch deprecated (slated for removal in favour of its CUDA backend)
/// while still shipping it, hence the allowance.
#[cfg(feature = "tch")]
#[allow(deprecated)]
mod libtorch {
    use burn::backend::LibTorchDevice;
    use burn::backend::libtorch::TchTensor;
    use burn::backend::{BackendTensor, DispatchAutodiffContext, DispatchDevice};
    use burn::backend::{DispatchTensor, DispatchTensorKind};
    use burn::tensor::kind::{Basic, Kind, TensorKind};
    use burn::tensor::{BoolStore, DType, Device, Tensor, TensorData};

    /// `data` on `device` through a pinned, non-blocking copy when
    /// `device` is a LibTorch CUDA device (with or without autodiff) and
    /// libtorch has a kind for the dtype; `data` back otherwise.
    pub(super) fn upload<const D: usize, K: Basic + TensorKind>(
        data: TensorData,
        device: &Device,
    ) -> Result<Tensor<D, K>, TensorData> {
        let DispatchDevice::LibTorch(LibTorchDevice::Cuda(index)) =
            device.clone().without_autodiff().as_dispatch().clone()
        else {
            return Err(data);
        };
        let target = target_dtype::<K>(device);
        let Some(kind) = tch_kind(target) else {
            return Err(data);
        };
        let data = data.convert_dtype(target);
        let cuda = tch::Device::Cuda(index);
        let Ok((tensor, pinned)) = to_device(&data, kind, cuda, true) else {
            return Err(data);
        };
        super::UPLOADS.record(pinned);
        Ok(wrap::<D, K>(tensor))
    }

    /// The dtype `Tensor::<D, K>::from_data` gives data on `device`.
    fn target_dtype<K: Basic + TensorKind>(device: &Device) -> DType {
        let settings = device.settings();
        match K::KIND {
            Kind::Float => settings.float_dtype.into(),
            Kind::Int => settings.int_dtype.into(),
            Kind::Bool => settings.bool_dtype.into(),
        }
    }

    /// libtorch's kind for `dtype`, where burn-tch stores that dtype as it is.
    fn tch_kind(dtype: DType) -> Option<tch::Kind> {
        Some(match dtype {
            DType::F64 => tch::Kind::Double,
            DType::F32 | DType::Flex32 => tch::Kind::Float,
            DType::F16 => tch::Kind::Half,
            DType::BF16 => tch::Kind::BFloat16,
            DType::I64 => tch::Kind::Int64,
            DType::Bool(BoolStore::Native) => tch::Kind::Bool,
            _ => return None,
        })
    }

    /// A CPU tensor holding `data`'s bytes (page-locked for `device` when
    /// `pinned`), then copied to `device` without blocking: libtorch orders
    /// the copy before every later use of the tensor on its stream, and the
    /// pinned source stays alive (the copy holds its storage) until then.
    /// With whether libtorch reports the source page-locked.
    pub(super) fn to_device(
        data: &TensorData,
        kind: tch::Kind,
        device: tch::Device,
        pinned: bool,
    ) -> Result<(tch::Tensor, bool), tch::TchError> {
        let dims: Vec<i64> = data.shape().iter().map(|&d| d as i64).collect();
        let host = tch::Tensor::f_empty(&dims, (kind, tch::Device::Cpu))?;
        let host = if pinned {
            host.f_pin_memory(device)?
        } else {
            host
        };
        let bytes = data.as_bytes();
        let len = host.numel() * kind.elt_size_in_bytes();
        if len != bytes.len() {
            return Err(tch::TchError::Shape(format!(
                "{} bytes of data for a tensor of {len} bytes",
                bytes.len()
            )));
        }
        if len > 0 {
            // SAFETY: `host` is a fresh, contiguous CPU tensor of exactly
            // `len` bytes (checked above) that nothing else references yet,
            // and `bytes` is a distinct allocation of the same length.
            unsafe {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), host.data_ptr().cast::<u8>(), len);
            }
        }
        let was_pinned = pinned && host.f_is_pinned(device)?;
        Ok((host.f_to_device_(device, kind, true, false)?, was_pinned))
    }

    /// `tensor` as burn's LibTorch primitive of kind `K`.
    pub(super) fn wrap<const D: usize, K: Basic + TensorKind>(tensor: tch::Tensor) -> Tensor<D, K> {
        let tensor = TchTensor::new(tensor);
        let tensor = match K::KIND {
            Kind::Float => BackendTensor::Float(tensor),
            Kind::Int => BackendTensor::Int(tensor),
            Kind::Bool => BackendTensor::Bool(tensor),
        };
        Tensor::from_dispatch(DispatchTensor {
            kind: DispatchTensorKind::LibTorch(tensor),
            autodiff: DispatchAutodiffContext::Disabled,
        })
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use burn::tensor::Int;

        /// The path a CUDA upload takes, on the CPU (no pinning, no GPU
        /// here): the bytes, dtype and shape burn sees are the data's.
        #[test]
        fn host_tensors_wrap_into_burn_tensors_of_the_data() {
            let data = TensorData::new(vec![1.5f32, -2.0, 3.25, 4.0, 0.0, 6.5], [2, 3]);
            let (t, pinned) = to_device(&data, tch::Kind::Float, tch::Device::Cpu, false).unwrap();
            assert!(!pinned);
            let burn = wrap::<2, burn::tensor::Float>(t);
            assert_eq!(burn.dims(), [2, 3]);
            assert_eq!(burn.to_data(), data);
            let labels = TensorData::new(vec![7i64, 0, 9], [3]);
            let (t, _) = to_device(&labels, tch::Kind::Int64, tch::Device::Cpu, false).unwrap();
            let burn = wrap::<1, Int>(t);
            assert_eq!(burn.to_data(), labels);
            let short = TensorData::new(vec![1.0f32], [1]);
            assert!(to_device(&short, tch::Kind::Double, tch::Device::Cpu, false).is_err());
        }

        /// A LibTorch CPU device keeps burn's own path, with the dtype
        /// `from_data` gives; the pinned path is only for CUDA devices.
        #[test]
        fn cpu_devices_take_burns_path() {
            let device = Device::libtorch();
            let data = TensorData::new(vec![1u8, 2, 3], [3]);
            assert!(upload::<1, Int>(data.clone(), &device).is_err());
            let t = super::super::upload::<1, Int>(data, &device);
            assert_eq!(t.to_data(), TensorData::new(vec![1i64, 2, 3], [3]));
            assert_eq!(
                tch_kind(target_dtype::<Int>(&device)),
                Some(tch::Kind::Int64)
            );
        }
    }
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
