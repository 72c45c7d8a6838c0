//! Batches gathered straight into typed vectors, for frameworks whose CPU
//! tensors own a `Vec<T>` (candle's `CpuStorage`, ndarray's `Array`).

use std::any::Any;

use half::f16;

use crate::dtype::DType;
use crate::error::{Error, StoreKind};
use crate::loader::{StageRequest, StagedBuffer, Staging};

/// An owned vector in one element type of the store: what a framework whose
/// CPU tensors own a `Vec<T>` takes over without a copy.
///
/// `bool` elements are held as their `u8` bytes (0 or 1), and a Ragged batch
/// (records 8-byte aligned) as `u64` words.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum TypedVec {
    /// `u8` elements (also `bool` bytes).
    U8(Vec<u8>),
    /// `i8` elements.
    I8(Vec<i8>),
    /// `u16` elements.
    U16(Vec<u16>),
    /// `i16` elements.
    I16(Vec<i16>),
    /// `u32` elements.
    U32(Vec<u32>),
    /// `i32` elements.
    I32(Vec<i32>),
    /// `u64` elements (also a Ragged batch's words).
    U64(Vec<u64>),
    /// `i64` elements.
    I64(Vec<i64>),
    /// `f16` elements.
    F16(Vec<f16>),
    /// `f32` elements.
    F32(Vec<f32>),
    /// `f64` elements.
    F64(Vec<f64>),
}

macro_rules! each_vec {
    ($v:expr, $x:ident => $body:expr) => {
        match $v {
            TypedVec::U8($x) => $body,
            TypedVec::I8($x) => $body,
            TypedVec::U16($x) => $body,
            TypedVec::I16($x) => $body,
            TypedVec::U32($x) => $body,
            TypedVec::I32($x) => $body,
            TypedVec::U64($x) => $body,
            TypedVec::I64($x) => $body,
            TypedVec::F16($x) => $body,
            TypedVec::F32($x) => $body,
            TypedVec::F64($x) => $body,
        }
    };
}

impl TypedVec {
    /// `len` zeroed elements of `dtype` (`bool` as `u8`).
    pub fn zeroed(dtype: DType, len: usize) -> TypedVec {
        match dtype {
            DType::I8 => TypedVec::I8(vec![0; len]),
            DType::U16 => TypedVec::U16(vec![0; len]),
            DType::I16 => TypedVec::I16(vec![0; len]),
            DType::U32 => TypedVec::U32(vec![0; len]),
            DType::I32 => TypedVec::I32(vec![0; len]),
            DType::U64 => TypedVec::U64(vec![0; len]),
            DType::I64 => TypedVec::I64(vec![0; len]),
            DType::F16 => TypedVec::F16(vec![f16::ZERO; len]),
            DType::F32 => TypedVec::F32(vec![0.0; len]),
            DType::F64 => TypedVec::F64(vec![0.0; len]),
            _ => TypedVec::U8(vec![0; len]),
        }
    }

    /// Zeroed room for a batch of `bytes` bytes of a `kind` stream of
    /// `dtype`: `bytes / size` elements for Dense, `u64` words covering
    /// `bytes` for Ragged (whose records are 8-byte aligned).
    pub fn for_batch(dtype: DType, kind: StoreKind, bytes: usize) -> TypedVec {
        match kind {
            StoreKind::Ragged => TypedVec::U64(vec![0; bytes.div_ceil(8)]),
            StoreKind::Dense => TypedVec::zeroed(dtype, bytes / dtype.size().max(1)),
        }
    }

    /// The elements' bytes.
    pub fn as_bytes(&self) -> &[u8] {
        each_vec!(self, v => bytemuck::cast_slice(v))
    }

    /// The elements' bytes, writable.
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        each_vec!(self, v => bytemuck::cast_slice_mut(v))
    }
}

/// A [`StagedBuffer`] that is a [`TypedVec`]: the batch's first
/// [`len`](Self::len) bytes (a Dense batch fills the vector exactly).
#[derive(Debug)]
pub struct VecBuffer {
    vec: TypedVec,
    len: usize,
}

impl VecBuffer {
    /// Room for the batch `request` describes ([`TypedVec::for_batch`]).
    pub fn for_request(request: &StageRequest<'_>) -> VecBuffer {
        VecBuffer {
            vec: TypedVec::for_batch(request.dtype, request.kind, request.bytes),
            len: request.bytes,
        }
    }

    /// The batch's length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the batch has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The vector, when it holds exactly the batch's bytes (a Dense batch of
    /// whole elements); otherwise the buffer back.
    ///
    /// # Errors
    ///
    /// The buffer itself when the vector is longer than the batch.
    pub fn into_vec(self) -> Result<TypedVec, VecBuffer> {
        if self.vec.as_bytes().len() == self.len {
            Ok(self.vec)
        } else {
            Err(self)
        }
    }
}

impl StagedBuffer for VecBuffer {
    fn as_bytes(&self) -> &[u8] {
        &self.vec.as_bytes()[..self.len]
    }

    fn as_bytes_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut self.vec.as_bytes_mut()[..len]
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any + Send> {
        self
    }
}

/// The [`Staging`] that gathers every batch into a fresh [`VecBuffer`].
#[derive(Debug, Clone, Copy, Default)]
pub struct VecStaging;

impl Staging for VecStaging {
    fn stage(&self, request: &StageRequest<'_>) -> Result<Box<dyn StagedBuffer>, Error> {
        Ok(Box::new(VecBuffer::for_request(request)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_batches_fill_the_vector_and_ragged_ones_take_words() {
        let dense = TypedVec::for_batch(DType::F32, StoreKind::Dense, 12);
        assert_eq!(dense, TypedVec::F32(vec![0.0; 3]));
        assert_eq!(dense.as_bytes().len(), 12);
        let ragged = TypedVec::for_batch(DType::U16, StoreKind::Ragged, 10);
        assert_eq!(ragged, TypedVec::U64(vec![0; 2]));
        assert_eq!(TypedVec::zeroed(DType::Bool, 4), TypedVec::U8(vec![0; 4]));
        for dtype in DType::ALL {
            let v = TypedVec::zeroed(dtype, 5);
            assert_eq!(v.as_bytes().len(), 5 * dtype.size(), "{dtype}");
        }
    }

    #[test]
    fn a_buffer_gives_its_vector_back_only_when_it_is_exactly_the_batch() {
        let mut b = VecBuffer {
            vec: TypedVec::zeroed(DType::I16, 2),
            len: 4,
        };
        b.as_bytes_mut().copy_from_slice(&[1, 0, 2, 0]);
        assert_eq!(b.into_vec().ok(), Some(TypedVec::I16(vec![1, 2])));
        let mut r = VecBuffer {
            vec: TypedVec::for_batch(DType::U8, StoreKind::Ragged, 3),
            len: 3,
        };
        assert_eq!(r.as_bytes_mut().len(), 3);
        assert_eq!(r.len(), 3);
        assert!(r.into_vec().is_err());
    }
}
