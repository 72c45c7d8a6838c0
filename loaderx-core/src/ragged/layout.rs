//! [`RaggedLayout`]: where each record of a gathered batch lies in its
//! buffer, and its checked constructor.

use std::borrow::Cow;

use crate::adapter::{HostArray, PackedRagged, PadValue, Padded, pad_records};
use crate::dtype::DType;
use crate::error::Error;

/// Where each record of a gathered ragged batch lies in its buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaggedLayout {
    pub(super) ndim: usize,
    pub(super) offsets: Vec<usize>,
    pub(super) byte_lens: Vec<usize>,
    pub(super) dims: Vec<usize>,
}

impl RaggedLayout {
    /// Number of records.
    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    /// True for an empty batch.
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// Shape of record `i`.
    ///
    /// # Panics
    ///
    /// When `i` is not below [`len`](Self::len).
    pub fn shape(&self, i: usize) -> &[usize] {
        &self.dims[i * self.ndim..(i + 1) * self.ndim]
    }

    /// Byte range of record `i`'s elements in the buffer.
    ///
    /// # Panics
    ///
    /// When `i` is not below [`len`](Self::len).
    pub fn byte_range(&self, i: usize) -> std::ops::Range<usize> {
        self.offsets[i]..self.offsets[i] + self.byte_lens[i]
    }
}

impl RaggedLayout {
    /// A layout of records with shapes `dims` (`ndim` values per record, in
    /// record order) at byte ranges `ranges` of a buffer of `buffer_len`
    /// bytes, with `elem_size`-byte elements.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) when
    /// `dims` does not hold `ndim` values per range, a range is reversed or
    /// past `buffer_len`, or a range's length is not its shape's element
    /// count times `elem_size`.
    pub fn try_new(
        ndim: usize,
        dims: Vec<usize>,
        ranges: &[std::ops::Range<usize>],
        elem_size: usize,
        buffer_len: usize,
    ) -> Result<RaggedLayout, Error> {
        if Some(dims.len()) != ranges.len().checked_mul(ndim) {
            return Err(Error::invalid(format!(
                "{} dims for {} records of rank {ndim}",
                dims.len(),
                ranges.len()
            )));
        }
        for (i, r) in ranges.iter().enumerate() {
            let shape = &dims[i * ndim..(i + 1) * ndim];
            let want = shape.iter().try_fold(elem_size, |a, &d| a.checked_mul(d));
            if r.start > r.end || r.end > buffer_len || want != Some(r.end - r.start) {
                return Err(Error::invalid(format!(
                    "record {i}: bytes {r:?} of a {buffer_len}-byte buffer do not hold shape \
                     {shape:?} of {elem_size}-byte elements"
                )));
            }
        }
        Ok(RaggedLayout {
            ndim,
            offsets: ranges.iter().map(|r| r.start).collect(),
            byte_lens: ranges.iter().map(|r| r.end - r.start).collect(),
            dims,
        })
    }

    /// Rank of every record.
    pub fn ndim(&self) -> usize {
        self.ndim
    }

    /// `(shape, bytes)` of every record in `bytes`, the buffer this layout
    /// describes.
    ///
    /// # Panics
    ///
    /// When `bytes` is shorter than the buffer the layout was made for.
    pub fn records<'a>(
        &'a self,
        bytes: &'a [u8],
    ) -> impl ExactSizeIterator<Item = (&'a [usize], &'a [u8])> + Clone + 'a {
        (0..self.len()).map(move |i| (self.shape(i), &bytes[self.byte_range(i)]))
    }

    /// True when the records lie end to end from the buffer's first byte,
    /// as a packed gather places them
    /// ([`DynRagged::gather_packed`](crate::DynRagged::gather_packed)): the
    /// buffer's first [`packed_bytes`](Self::packed_bytes) are then the
    /// batch's `values`, with no copy.
    pub fn is_packed(&self) -> bool {
        let mut at = 0usize;
        for (&offset, &len) in self.offsets.iter().zip(&self.byte_lens) {
            if offset != at {
                return false;
            }
            at += len;
        }
        true
    }

    /// Bytes of every record's elements together.
    pub fn packed_bytes(&self) -> usize {
        self.byte_lens.iter().sum()
    }

    /// Record offsets in elements of `elem_size` bytes, `len() + 1` of
    /// them from 0: record `i`'s elements are `values[cu[i]..cu[i + 1]]`
    /// (what Python loaderx 2.8.19 and variable-length attention kernels
    /// call `cu_seqlens`).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument)
    /// when the batch holds more than `i32::MAX` elements (the offsets'
    /// type), or `elem_size` is 0.
    pub fn cu_seqlens(&self, elem_size: usize) -> Result<Vec<i32>, Error> {
        if elem_size == 0 {
            return Err(Error::invalid("elements of 0 bytes"));
        }
        let mut cu = Vec::with_capacity(self.len() + 1);
        let mut at = 0i32;
        cu.push(at);
        for &len in &self.byte_lens {
            at = i32::try_from(len / elem_size)
                .ok()
                .and_then(|n| at.checked_add(n))
                .ok_or_else(|| {
                    Error::invalid(format!(
                        "a packed batch of {} records holds more than {} elements, \
                         the most int32 offsets address",
                        self.len(),
                        i32::MAX
                    ))
                })?;
            cu.push(at);
        }
        Ok(cu)
    }

    /// Every record's shape as `u32`s, `ndim` per record in record order
    /// (the `(records, ndim)` `shapes` of a packed batch).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument)
    /// for a dimension above `u32::MAX`.
    pub fn shapes_u32(&self) -> Result<Vec<u32>, Error> {
        self.dims
            .iter()
            .map(|&d| {
                u32::try_from(d).map_err(|_| {
                    Error::invalid(format!(
                        "a record dimension of {d} does not fit the uint32 shapes of a packed batch"
                    ))
                })
            })
            .collect()
    }

    /// The records in `bytes` (the buffer this layout describes) as a
    /// packed batch in host memory: `values` (1-D, `dtype`) copied end to
    /// end, `cu_seqlens` (`i32`, `len() + 1`) and `shapes` (`u32`,
    /// `(len(), ndim)`).
    ///
    /// # Errors
    ///
    /// As [`cu_seqlens`](Self::cu_seqlens) and
    /// [`shapes_u32`](Self::shapes_u32); a `bytes` shorter than the
    /// layout's buffer is
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument).
    pub fn packed(&self, dtype: DType, bytes: &[u8]) -> Result<PackedRagged, Error> {
        let total = self.packed_bytes();
        let mut values = crate::adapter::AlignedBuf::zeroed(total)?;
        self.copy_packed(bytes, values.as_bytes_mut())?;
        let elements = total / dtype.size().max(1);
        Ok(PackedRagged {
            values: HostArray::try_new(dtype, vec![elements], values)?,
            cu_seqlens: self.cu_seqlens_array(dtype)?,
            shapes: self.shapes_array()?,
        })
    }

    /// The records' elements in `bytes` (the buffer this layout describes)
    /// end to end: `bytes`' own first [`packed_bytes`](Self::packed_bytes)
    /// when the layout [`is_packed`](Self::is_packed), a copy otherwise.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument)
    /// for a `bytes` shorter than the layout's buffer.
    pub fn packed_values<'a>(&self, bytes: &'a [u8]) -> Result<Cow<'a, [u8]>, Error> {
        let total = self.packed_bytes();
        if self.is_packed() {
            return bytes.get(..total).map(Cow::Borrowed).ok_or_else(|| {
                Error::invalid(format!(
                    "the layout needs {total} bytes, the buffer has {}",
                    bytes.len()
                ))
            });
        }
        let mut values = vec![0u8; total];
        self.copy_packed(bytes, &mut values)?;
        Ok(Cow::Owned(values))
    }

    /// Copies every record's elements in `bytes` end to end into `dst`
    /// ([`packed_bytes`](Self::packed_bytes) long).
    fn copy_packed(&self, bytes: &[u8], dst: &mut [u8]) -> Result<(), Error> {
        let mut at = 0;
        for i in 0..self.len() {
            let range = self.byte_range(i);
            let src = bytes.get(range.clone()).ok_or_else(|| {
                Error::invalid(format!(
                    "record {i} lies at bytes {range:?}, the buffer has {}",
                    bytes.len()
                ))
            })?;
            dst[at..at + src.len()].copy_from_slice(src);
            at += src.len();
        }
        Ok(())
    }

    /// [`cu_seqlens`](Self::cu_seqlens) of `dtype`'s elements as an `i32`
    /// host array of `len() + 1`.
    ///
    /// # Errors
    ///
    /// As [`cu_seqlens`](Self::cu_seqlens).
    pub fn cu_seqlens_array(&self, dtype: DType) -> Result<HostArray, Error> {
        let cu = self.cu_seqlens(dtype.size())?;
        let n = cu.len();
        HostArray::from_slice(&cu, vec![n])
    }

    /// [`shapes_u32`](Self::shapes_u32) as a `(len(), ndim)` `u32` host
    /// array.
    ///
    /// # Errors
    ///
    /// As [`shapes_u32`](Self::shapes_u32).
    pub fn shapes_array(&self) -> Result<HostArray, Error> {
        HostArray::from_slice(&self.shapes_u32()?, vec![self.len(), self.ndim])
    }

    /// Pads the records in `bytes` (the buffer this layout describes) to the
    /// largest extent of every axis; see [`pad_records`].
    ///
    /// # Errors
    ///
    /// As [`pad_records`]; a `bytes` shorter than the layout's buffer is
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument).
    pub fn pad(&self, dtype: DType, bytes: &[u8], pad: PadValue) -> Result<Padded, Error> {
        if let Some(end) = (0..self.len()).map(|i| self.byte_range(i).end).max()
            && end > bytes.len()
        {
            return Err(Error::invalid(format!(
                "the layout needs {end} bytes, the buffer has {}",
                bytes.len()
            )));
        }
        pad_records(dtype, self.ndim, self.records(bytes), pad)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn padding_places_records_in_the_corner() {
        // Records (2, 3) and (1, 1) of u8 in one buffer (byte ranges 0..6, 8..9).
        let layout = RaggedLayout::try_new(2, vec![2, 3, 1, 1], &[0..6, 8..9], 1, 9).unwrap();
        let bytes = [1, 2, 3, 4, 5, 6, 0, 0, 9];
        let p = layout.pad(DType::U8, &bytes, PadValue::ZERO).unwrap();
        assert_eq!(p.values.shape(), &[2, 2, 3]);
        assert_eq!(p.values.bytes(), &[1, 2, 3, 4, 5, 6, 9, 0, 0, 0, 0, 0]);
        assert_eq!(p.lengths.as_slice::<i64>().unwrap(), &[2, 3, 1, 1]);
        assert!(layout.pad(DType::U8, &bytes[..8], PadValue::ZERO).is_err());
    }

    #[test]
    #[allow(clippy::single_range_in_vec_init)]
    fn checked_layouts_refuse_what_does_not_fit() {
        assert!(RaggedLayout::try_new(1, vec![2], &[0..8], 4, 8).is_ok());
        assert!(RaggedLayout::try_new(1, vec![2], &[0..8], 4, 7).is_err());
        assert!(RaggedLayout::try_new(1, vec![3], &[0..8], 4, 8).is_err());
        assert!(RaggedLayout::try_new(2, vec![2], &[0..8], 4, 8).is_err());
        #[allow(clippy::reversed_empty_ranges)]
        let reversed = [8..0];

        assert!(RaggedLayout::try_new(1, vec![0], &reversed, 4, 8).is_err());
        assert!(RaggedLayout::try_new(2, vec![usize::MAX, 2], &[0..0], 4, 8).is_err());
    }

    #[test]
    fn padding_that_cannot_be_allocated_is_an_error() {
        // Two empty records whose extents multiply past any memory.
        let layout = RaggedLayout {
            ndim: 2,
            offsets: vec![0, 0],
            byte_lens: vec![0, 0],
            dims: vec![0, 1 << 40, 1 << 40, 0],
        };
        let err = layout.pad(DType::F32, &[], PadValue::ZERO).unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::InvalidArgument { .. }),
            "{err}"
        );
        let overflow = RaggedLayout {
            ndim: 2,
            offsets: vec![0],
            byte_lens: vec![0],
            dims: vec![usize::MAX, 0],
        };
        let layout = RaggedLayout {
            dims: vec![usize::MAX, 0, 0, 2],
            offsets: vec![0, 0],
            byte_lens: vec![0, 0],
            ..overflow
        };
        assert!(layout.pad(DType::U8, &[], PadValue::ZERO).is_err());
    }
}
