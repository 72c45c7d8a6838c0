//! Gathered Ragged batches: [`DynRaggedBatch`] and the typed [`RaggedBatch`].

use std::marker::PhantomData;

use ndarray::{ArrayD, ArrayViewD, IxDyn};

use super::RaggedLayout;
use crate::adapter::{PackedRagged, PadValue, Padded};
use crate::dtype::{DType, Element};
use crate::error::Error;

/// A gathered ragged batch, element type known at run time: one allocation
/// plus a [`RaggedLayout`].
#[derive(Debug, Clone)]
pub struct DynRaggedBatch {
    pub(super) storage: Vec<u64>,
    pub(super) layout: RaggedLayout,
    pub(super) dtype: DType,
}

impl DynRaggedBatch {
    /// Number of records.
    pub fn len(&self) -> usize {
        self.layout.len()
    }

    /// True for an empty batch.
    pub fn is_empty(&self) -> bool {
        self.layout.is_empty()
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Shape of record `i`.
    ///
    /// # Panics
    ///
    /// When `i` is not below [`len`](Self::len).
    pub fn shape(&self, i: usize) -> &[usize] {
        self.layout.shape(i)
    }

    /// Element bytes of record `i`.
    ///
    /// # Panics
    ///
    /// When `i` is not below [`len`](Self::len).
    pub fn bytes(&self, i: usize) -> &[u8] {
        &bytemuck::cast_slice::<u64, u8>(&self.storage)[self.layout.byte_range(i)]
    }

    /// Where each record lies in the allocation.
    pub fn layout(&self) -> &RaggedLayout {
        &self.layout
    }

    /// The batch as `values`, `cu_seqlens` and `shapes` in host memory
    /// (see [`PackedRagged`]); the values are copied, from a packed
    /// gather's allocation as from any other.
    ///
    /// # Errors
    ///
    /// As [`RaggedLayout::packed`]: more than `i32::MAX` elements, a
    /// dimension above `u32::MAX`.
    pub fn packed(&self) -> Result<PackedRagged, Error> {
        self.layout
            .packed(self.dtype, bytemuck::cast_slice::<u64, u8>(&self.storage))
    }

    /// The batch padded to the largest extent of every axis, with lengths
    /// and a mask (see [`pad_records`](crate::adapter::pad_records)).
    ///
    /// # Errors
    ///
    /// As [`pad_records`](crate::adapter::pad_records).
    pub fn pad(&self, pad: PadValue) -> Result<Padded, Error> {
        self.layout
            .pad(self.dtype, bytemuck::cast_slice(&self.storage), pad)
    }

    /// This batch with element type `T`, if `T` is its type and (for `bool`)
    /// every byte is 0 or 1.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) when
    /// `T` is not the batch's element type or its bytes are not valid `T`
    /// values (a `bool` byte other than 0 or 1).
    pub fn typed<T: Element>(self) -> Result<RaggedBatch<T>, Error> {
        if self.dtype != T::DTYPE {
            return Err(Error::invalid(format!(
                "batch holds {}, asked for {}",
                self.dtype,
                T::DTYPE
            )));
        }
        if (0..self.len()).any(|i| T::try_from_bytes(self.bytes(i)).is_none()) {
            return Err(Error::invalid(format!(
                "batch bytes are not valid {} values",
                T::DTYPE
            )));
        }
        Ok(RaggedBatch {
            inner: self,
            _t: PhantomData,
        })
    }
}

/// A gathered ragged batch of element type `T`.
#[derive(Debug, Clone)]
pub struct RaggedBatch<T: Element> {
    inner: DynRaggedBatch,
    _t: PhantomData<fn() -> T>,
}

impl<T: Element> RaggedBatch<T> {
    /// Number of records.
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// True for an empty batch.
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// Shape of record `i`.
    ///
    /// # Panics
    ///
    /// When `i` is not below [`len`](Self::len).
    pub fn shape(&self, i: usize) -> &[usize] {
        self.inner.shape(i)
    }

    /// Elements of record `i`, C order.
    ///
    /// # Panics
    ///
    /// When `i` is not below [`len`](Self::len).
    pub fn data(&self, i: usize) -> &[T] {
        T::try_from_bytes(self.inner.bytes(i))
            .expect("element bytes were validated and aligned when the batch was built")
    }

    /// Record `i` as an array view.
    ///
    /// # Panics
    ///
    /// When `i` is not below [`len`](Self::len).
    pub fn view(&self, i: usize) -> ArrayViewD<'_, T> {
        ArrayViewD::from_shape(IxDyn(self.shape(i)), self.data(i))
            .expect("record shape and length were validated when the batch was built")
    }

    /// Every record as a view, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = ArrayViewD<'_, T>> + '_ {
        (0..self.len()).map(|i| self.view(i))
    }

    /// Copies every record into its own array.
    pub fn to_arrays(&self) -> Vec<ArrayD<T>> {
        self.iter().map(|v| v.to_owned()).collect()
    }

    /// Where each record lies in the allocation.
    pub fn layout(&self) -> &RaggedLayout {
        self.inner.layout()
    }

    /// The untyped batch.
    pub fn into_dyn(self) -> DynRaggedBatch {
        self.inner
    }
}
