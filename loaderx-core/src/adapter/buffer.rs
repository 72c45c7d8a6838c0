//! The aligned host buffer and the typed host array built on it.

use std::mem::MaybeUninit;

use ndarray::{ArrayViewD, IxDyn};

use crate::dtype::{DType, Element};
use crate::error::{Error, ErrorKind};
use crate::loader::StagedBuffer;

/// Bytes in an 8-byte-aligned heap allocation, so that a typed view of any
/// element type is possible without a copy.
///
/// This is the buffer of the default staging ([`BufferPool`](crate::loader::BufferPool))
/// and of every host array this module builds.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct AlignedBuf {
    words: Vec<u64>,
    len: usize,
}

impl AlignedBuf {
    /// `len` zero bytes.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Buffer`] when the memory cannot be had (sizes often come
    /// from stores: too large must be an error, not an abort).
    pub fn zeroed(len: usize) -> Result<AlignedBuf, Error> {
        let mut words = Vec::new();
        words
            .try_reserve_exact(len.div_ceil(8))
            .map_err(|_| ErrorKind::Buffer {
                detail: format!("cannot allocate a {len}-byte host buffer"),
            })?;
        words.resize(len.div_ceil(8), 0);
        Ok(AlignedBuf { words, len })
    }

    /// A copy of `bytes`.
    ///
    /// # Errors
    ///
    /// As [`zeroed`](Self::zeroed).
    pub fn from_bytes(bytes: &[u8]) -> Result<AlignedBuf, Error> {
        let mut b = AlignedBuf::zeroed(bytes.len())?;
        b.as_bytes_mut().copy_from_slice(bytes);
        Ok(b)
    }

    /// Resizes to `len` bytes, keeping the allocation when it is large
    /// enough; bytes past the old length are zero, bytes before it are kept.
    ///
    /// # Errors
    ///
    /// As [`zeroed`](Self::zeroed); the buffer is unchanged then.
    pub fn resize(&mut self, len: usize) -> Result<(), Error> {
        let words = len.div_ceil(8);
        if words > self.words.len() {
            self.words
                .try_reserve_exact(words - self.words.len())
                .map_err(|_| ErrorKind::Buffer {
                    detail: format!("cannot allocate a {len}-byte host buffer"),
                })?;
        }
        // Bytes between the old length and the end of its last word may hold
        // old data: clear them so that growing always shows zeros.
        if len > self.len {
            let old = self.len;
            let end = (old.div_ceil(8) * 8).min(len);
            bytemuck::cast_slice_mut::<u64, u8>(&mut self.words)[old..end].fill(0);
        }
        self.words.resize(words, 0);
        self.len = len;
        Ok(())
    }

    /// Makes room for at least `capacity` bytes without changing the length.
    ///
    /// # Errors
    ///
    /// As [`zeroed`](Self::zeroed); the buffer is unchanged then.
    pub fn reserve(&mut self, capacity: usize) -> Result<(), Error> {
        let words = capacity.div_ceil(8);
        if words > self.words.capacity() {
            self.words
                .try_reserve_exact(words - self.words.len())
                .map_err(|_| ErrorKind::Buffer {
                    detail: format!("cannot allocate a {capacity}-byte host buffer"),
                })?;
        }
        Ok(())
    }

    /// Room for `len` bytes that a gather writes without their being zeroed
    /// first: empties the buffer (length 0, the allocation kept, or grown to
    /// `len` bytes) and returns the memory of its first `len` bytes, which
    /// the buffer holds only once [`assume_init`](Self::assume_init) says
    /// they were all written.
    ///
    /// # Errors
    ///
    /// As [`zeroed`](Self::zeroed); the buffer is empty then.
    pub(crate) fn uninit_mut(&mut self, len: usize) -> Result<&mut [MaybeUninit<u8>], Error> {
        self.words.clear();
        self.len = 0;
        self.words
            .try_reserve_exact(len.div_ceil(8))
            .map_err(|_| ErrorKind::Buffer {
                detail: format!("cannot allocate a {len}-byte host buffer"),
            })?;
        Ok(&mut spare_bytes(&mut self.words)[..len])
    }

    /// Makes the `len` bytes written through [`uninit_mut`](Self::uninit_mut)
    /// the buffer's, zeroing the rest of their last 8-byte word.
    ///
    /// # Safety
    ///
    /// The buffer's last `&mut self` call was `uninit_mut(len)`, which
    /// returned `Ok`, with this `len`, and every byte of the slice it
    /// returned has been written since.
    ///
    /// # Panics
    ///
    /// When the buffer is not empty or has no room for `len` bytes (no
    /// `uninit_mut(len)` before).
    pub(crate) unsafe fn assume_init(&mut self, len: usize) {
        let words = len.div_ceil(8);
        assert!(
            self.words.is_empty() && words <= self.words.capacity(),
            "assume_init({len}) without uninit_mut({len})"
        );
        spare_bytes(&mut self.words)[len..words * 8].fill(MaybeUninit::new(0));
        // SAFETY: `words` words are allocated (checked above); their first
        // `len` bytes were written, as the caller guarantees, and the rest
        // of the last word was zeroed just above; any bytes are a valid `u64`.
        unsafe { self.words.set_len(words) };
        self.len = len;
    }

    /// Bytes held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no byte is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes allocated (a multiple of 8, at least `len`).
    pub fn capacity(&self) -> usize {
        self.words.capacity() * 8
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.words)[..self.len]
    }

    /// The bytes, writable.
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(&mut self.words)[..self.len]
    }

    /// The bytes as elements of `T`, without a copy.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] when the length is not a multiple of
    /// `T`'s size, or (for `bool`) a byte is neither 0 nor 1.
    pub fn as_slice<T: Element>(&self) -> Result<&[T], Error> {
        T::try_from_bytes(self.as_bytes()).ok_or_else(|| {
            Error::invalid(format!(
                "{} bytes are not a whole number of valid {} values",
                self.len,
                T::DTYPE
            ))
        })
    }
}

/// The spare capacity of `words` (past its length) as bytes, for code that
/// writes them before extending `words` over them.
pub(crate) fn spare_bytes(words: &mut Vec<u64>) -> &mut [MaybeUninit<u8>] {
    let spare = words.spare_capacity_mut();
    // SAFETY: the byte slice covers exactly the memory of `spare`, 8 bytes
    // per word, borrowed mutably from it for the same lifetime;
    // `MaybeUninit<u8>` has alignment 1 and no validity requirement.
    unsafe { std::slice::from_raw_parts_mut(spare.as_mut_ptr().cast(), spare.len() * 8) }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedBuf({} bytes)", self.len)
    }
}

impl StagedBuffer for AlignedBuf {
    fn as_bytes(&self) -> &[u8] {
        AlignedBuf::as_bytes(self)
    }

    fn as_bytes_mut(&mut self) -> &mut [u8] {
        AlignedBuf::as_bytes_mut(self)
    }
}

/// A C-order array of one element type in an [`AlignedBuf`]: what padding
/// and widening produce, and what an adapter turns into one tensor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostArray {
    dtype: DType,
    shape: Vec<usize>,
    bytes: AlignedBuf,
}

impl HostArray {
    /// An array of `shape` holding `bytes` of `dtype`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] when the byte count is not
    /// `product(shape) * dtype.size()`, or a `bool` byte is neither 0 nor 1.
    pub fn try_new(dtype: DType, shape: Vec<usize>, bytes: AlignedBuf) -> Result<HostArray, Error> {
        let want = shape
            .iter()
            .try_fold(dtype.size(), |acc, &d| acc.checked_mul(d));
        if want != Some(bytes.len()) {
            return Err(Error::invalid(format!(
                "{} bytes cannot hold a {dtype} array of shape {shape:?}",
                bytes.len()
            )));
        }
        if dtype == DType::Bool && bytes.as_bytes().iter().any(|&b| b > 1) {
            return Err(Error::invalid("bool bytes must be 0 or 1"));
        }
        Ok(HostArray {
            dtype,
            shape,
            bytes,
        })
    }

    /// An array of `values`, shaped `shape`.
    ///
    /// # Errors
    ///
    /// As [`try_new`](Self::try_new).
    pub fn from_slice<T: Element>(values: &[T], shape: Vec<usize>) -> Result<HostArray, Error> {
        HostArray::try_new(
            T::DTYPE,
            shape,
            AlignedBuf::from_bytes(T::as_bytes(values))?,
        )
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// True when the array holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The element bytes, C order.
    pub fn bytes(&self) -> &[u8] {
        self.bytes.as_bytes()
    }

    /// The elements as `T`, without a copy.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] when `T` is not the array's type.
    pub fn as_slice<T: Element>(&self) -> Result<&[T], Error> {
        if T::DTYPE != self.dtype {
            return Err(Error::invalid(format!(
                "array holds {}, asked for {}",
                self.dtype,
                T::DTYPE
            )));
        }
        self.bytes.as_slice()
    }

    /// An `ndarray` view, without a copy.
    ///
    /// # Errors
    ///
    /// As [`as_slice`](Self::as_slice).
    pub fn view<T: Element>(&self) -> Result<ArrayViewD<'_, T>, Error> {
        ArrayViewD::from_shape(IxDyn(&self.shape), self.as_slice()?)
            .map_err(|e| Error::invalid(e.to_string()))
    }

    /// `(dtype, shape, bytes)`.
    pub fn into_parts(self) -> (DType, Vec<usize>, AlignedBuf) {
        (self.dtype, self.shape, self.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_typed() {
        let b = AlignedBuf::from_bytes(&1.5f32.to_le_bytes()).unwrap();
        assert_eq!(b.as_bytes().as_ptr() as usize % 8, 0);
        assert_eq!(b.as_slice::<f32>().unwrap(), &[1.5]);
        assert!(b.as_slice::<f64>().is_err());
        assert!(AlignedBuf::zeroed(usize::MAX / 2).is_err());
    }

    #[test]
    fn resize_shows_zeros_past_the_old_length() {
        let mut b = AlignedBuf::from_bytes(&[9; 13]).unwrap();
        b.resize(3).unwrap();
        b.resize(16).unwrap();
        assert_eq!(
            b.as_bytes(),
            &[9, 9, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        );
    }

    #[test]
    fn written_uninitialised_bytes_become_the_buffer() {
        let mut b = AlignedBuf::from_bytes(&[9; 40]).unwrap();
        let dst = b.uninit_mut(13).unwrap();
        assert_eq!(dst.len(), 13);
        for (i, d) in dst.iter_mut().enumerate() {
            d.write(i as u8 + 1);
        }
        // SAFETY: all 13 bytes were written just above.
        unsafe { b.assume_init(13) };
        assert_eq!(b.as_bytes(), &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]);
        // The rest of the last word is zero, as after `resize`.
        b.resize(16).unwrap();
        assert_eq!(&b.as_bytes()[13..], &[0, 0, 0]);
        // Growing past the allocation keeps the bytes' address 8-aligned.
        let dst = b.uninit_mut(1000).unwrap();
        assert_eq!(dst.as_ptr() as usize % 8, 0);
        dst.fill(MaybeUninit::new(7));
        // SAFETY: all 1000 bytes were written just above.
        unsafe { b.assume_init(1000) };
        assert!(b.as_bytes().iter().all(|&x| x == 7));
        // A failed reservation leaves an empty buffer.
        assert!(b.uninit_mut(usize::MAX / 2).is_err());
        assert!(b.is_empty());
    }

    #[test]
    fn arrays_check_their_size_and_bools() {
        let a = HostArray::from_slice(&[1u16, 2, 3, 4, 5, 6], vec![2, 3]).unwrap();
        assert_eq!(a.view::<u16>().unwrap()[[1, 2]], 6);
        assert!(a.view::<i16>().is_err());
        let bytes = AlignedBuf::from_bytes(&[0, 1, 2]).unwrap();
        assert!(HostArray::try_new(DType::Bool, vec![3], bytes.clone()).is_err());
        assert!(HostArray::try_new(DType::U8, vec![3], bytes.clone()).is_ok());
        assert!(HostArray::try_new(DType::U8, vec![4], bytes).is_err());
        assert!(
            HostArray::try_new(DType::U64, vec![usize::MAX, 2], AlignedBuf::default()).is_err()
        );
    }
}
