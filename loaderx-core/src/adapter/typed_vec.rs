//! Batches gathered straight into typed vectors, for frameworks whose CPU
//! tensors own a `Vec<T>` (candle's `CpuStorage`, ndarray's `Array`).

use half::{bf16, f16};

use crate::dtype::{Complex32, Complex64, F8E4M3Fn, F8E4M3Fnuz, F8E5M2, F8E5M2Fnuz, F8E8M0Fnu};

use crate::dtype::DType;
use crate::error::{Error, ErrorKind, StoreKind};
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
    /// `bf16` elements.
    BF16(Vec<bf16>),
    /// `float8_e4m3fn` elements.
    F8E4M3Fn(Vec<F8E4M3Fn>),
    /// `float8_e4m3fnuz` elements.
    F8E4M3Fnuz(Vec<F8E4M3Fnuz>),
    /// `float8_e5m2` elements.
    F8E5M2(Vec<F8E5M2>),
    /// `float8_e5m2fnuz` elements.
    F8E5M2Fnuz(Vec<F8E5M2Fnuz>),
    /// `float8_e8m0fnu` elements.
    F8E8M0Fnu(Vec<F8E8M0Fnu>),
    /// `complex64` elements.
    C64(Vec<Complex32>),
    /// `complex128` elements.
    C128(Vec<Complex64>),
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
            TypedVec::BF16($x) => $body,
            TypedVec::F8E4M3Fn($x) => $body,
            TypedVec::F8E4M3Fnuz($x) => $body,
            TypedVec::F8E5M2($x) => $body,
            TypedVec::F8E5M2Fnuz($x) => $body,
            TypedVec::F8E8M0Fnu($x) => $body,
            TypedVec::C64($x) => $body,
            TypedVec::C128($x) => $body,
        }
    };
}

/// `len` copies of `zero` in a vector reserved fallibly: sizes come from
/// stores and options, so memory that cannot be had is an error.
fn filled<T: Clone>(len: usize, zero: T, dtype: DType) -> Result<Vec<T>, Error> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| ErrorKind::Buffer {
        detail: format!("cannot allocate a vector of {len} {dtype} elements"),
    })?;
    v.resize(len, zero);
    Ok(v)
}

impl TypedVec {
    /// `len` zeroed elements of `dtype` (`bool` as `u8`).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Buffer`] when the memory cannot be had (or its size
    /// overflows), never an abort.
    pub fn zeroed(dtype: DType, len: usize) -> Result<TypedVec, Error> {
        Ok(match dtype {
            DType::I8 => TypedVec::I8(filled(len, 0, dtype)?),
            DType::U16 => TypedVec::U16(filled(len, 0, dtype)?),
            DType::I16 => TypedVec::I16(filled(len, 0, dtype)?),
            DType::U32 => TypedVec::U32(filled(len, 0, dtype)?),
            DType::I32 => TypedVec::I32(filled(len, 0, dtype)?),
            DType::U64 => TypedVec::U64(filled(len, 0, dtype)?),
            DType::I64 => TypedVec::I64(filled(len, 0, dtype)?),
            DType::F16 => TypedVec::F16(filled(len, f16::ZERO, dtype)?),
            DType::F32 => TypedVec::F32(filled(len, 0.0, dtype)?),
            DType::F64 => TypedVec::F64(filled(len, 0.0, dtype)?),
            DType::BF16 => TypedVec::BF16(filled(len, bf16::ZERO, dtype)?),
            DType::F8E4M3Fn => TypedVec::F8E4M3Fn(filled(len, F8E4M3Fn::default(), dtype)?),
            DType::F8E4M3Fnuz => TypedVec::F8E4M3Fnuz(filled(len, F8E4M3Fnuz::default(), dtype)?),
            DType::F8E5M2 => TypedVec::F8E5M2(filled(len, F8E5M2::default(), dtype)?),
            DType::F8E5M2Fnuz => TypedVec::F8E5M2Fnuz(filled(len, F8E5M2Fnuz::default(), dtype)?),
            DType::F8E8M0Fnu => TypedVec::F8E8M0Fnu(filled(len, F8E8M0Fnu::default(), dtype)?),
            DType::C64 => TypedVec::C64(filled(len, Complex32::default(), dtype)?),
            DType::C128 => TypedVec::C128(filled(len, Complex64::default(), dtype)?),
            DType::Bool | DType::U8 => TypedVec::U8(filled(len, 0, dtype)?),
        })
    }

    /// Zeroed room for a batch of `bytes` bytes of a `kind` stream of
    /// `dtype`: `bytes / size` elements for Dense, `u64` words covering
    /// `bytes` for Ragged (whose records are 8-byte aligned).
    ///
    /// # Errors
    ///
    /// As [`zeroed`](Self::zeroed): a batch size a (possibly damaged) store
    /// claims is an error when it cannot be had.
    pub fn for_batch(dtype: DType, kind: StoreKind, bytes: usize) -> Result<TypedVec, Error> {
        match kind {
            StoreKind::Ragged => Ok(TypedVec::U64(filled(bytes.div_ceil(8), 0, DType::U64)?)),
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
    /// Room for the batch `request` describes: a vector of its element
    /// type when it is one array (a Dense batch, packed Ragged values:
    /// [`StageRequest::shape`] is given), so that it becomes a tensor's
    /// storage as it is; otherwise [`TypedVec::for_batch`].
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Buffer`] when the memory cannot be had.
    pub fn for_request(request: &StageRequest<'_>) -> Result<VecBuffer, Error> {
        let vec = match request.shape {
            Some(_) => {
                TypedVec::zeroed(request.dtype, request.bytes / request.dtype.size().max(1))?
            }
            None => TypedVec::for_batch(request.dtype, request.kind, request.bytes)?,
        };
        Ok(VecBuffer {
            vec,
            len: request.bytes,
        })
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
}

/// The [`Staging`] that gathers every batch into a fresh [`VecBuffer`],
/// reserved fallibly: a batch larger than memory is an
/// [`ErrorKind::Buffer`], as with the default pool.
#[derive(Debug, Clone, Copy, Default)]
pub struct VecStaging;

impl Staging for VecStaging {
    type Buffer = VecBuffer;

    fn stage(&self, request: &StageRequest<'_>) -> Result<VecBuffer, Error> {
        VecBuffer::for_request(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_batches_fill_the_vector_and_ragged_ones_take_words() {
        let dense = TypedVec::for_batch(DType::F32, StoreKind::Dense, 12).unwrap();
        assert_eq!(dense, TypedVec::F32(vec![0.0; 3]));
        assert_eq!(dense.as_bytes().len(), 12);
        let ragged = TypedVec::for_batch(DType::U16, StoreKind::Ragged, 10).unwrap();
        assert_eq!(ragged, TypedVec::U64(vec![0; 2]));
        assert_eq!(
            TypedVec::zeroed(DType::Bool, 4).unwrap(),
            TypedVec::U8(vec![0; 4])
        );
        for dtype in DType::ALL {
            let v = TypedVec::zeroed(dtype, 5).unwrap();
            assert_eq!(v.as_bytes().len(), 5 * dtype.size(), "{dtype}");
        }
    }

    #[test]
    fn a_buffer_gives_its_vector_back_only_when_it_is_exactly_the_batch() {
        let mut b = VecBuffer {
            vec: TypedVec::zeroed(DType::I16, 2).unwrap(),
            len: 4,
        };
        b.as_bytes_mut().copy_from_slice(&[1, 0, 2, 0]);
        assert_eq!(b.into_vec().ok(), Some(TypedVec::I16(vec![1, 2])));
        let mut r = VecBuffer {
            vec: TypedVec::for_batch(DType::U8, StoreKind::Ragged, 3).unwrap(),
            len: 3,
        };
        assert_eq!(r.as_bytes_mut().len(), 3);
        assert_eq!(r.len(), 3);
        assert!(r.into_vec().is_err());
    }

    #[test]
    fn sizes_beyond_memory_are_buffer_errors_not_panics() {
        // Sizes whose bytes overflow `isize`: an infallible `vec!` panics
        // ("capacity overflow") here; the staging path must say Buffer.
        for (dtype, kind, bytes) in [
            (DType::U64, StoreKind::Dense, usize::MAX),
            (DType::F32, StoreKind::Dense, usize::MAX - 3),
            (DType::U8, StoreKind::Ragged, usize::MAX),
            (DType::F16, StoreKind::Ragged, usize::MAX / 2 + 9),
        ] {
            let e = TypedVec::for_batch(dtype, kind, bytes).unwrap_err();
            assert!(
                matches!(e.kind(), ErrorKind::Buffer { .. }),
                "{dtype} {kind:?}: {e}"
            );
        }
        let e = TypedVec::zeroed(DType::I64, usize::MAX / 4).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Buffer { .. }), "{e}");
        let request = StageRequest {
            step: 3,
            stream: "tok",
            stream_index: 0,
            view: 0,
            kind: StoreKind::Ragged,
            dtype: DType::U32,
            bytes: usize::MAX - 7,
            shape: None,
        };
        let e = VecStaging.stage(&request).err().unwrap();
        assert!(matches!(e.kind(), ErrorKind::Buffer { .. }), "{e}");
    }
}
