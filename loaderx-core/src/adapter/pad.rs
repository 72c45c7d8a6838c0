//! The one padding definition: records of any rank padded to the largest
//! extent of every axis, with per-record lengths and an element mask.

use super::buffer::{AlignedBuf, HostArray};
use crate::dtype::{DType, Element};
use crate::error::Error;

/// The value padding positions hold (default: zero bytes, which is `0`,
/// `0.0` and `false` for every type).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PadValue {
    dtype: Option<DType>,
    /// One element's bytes (the widest type, `complex128`, has 16).
    bytes: [u8; 16],
}

impl PadValue {
    /// Zero bytes, for any element type.
    pub const ZERO: PadValue = PadValue {
        dtype: None,
        bytes: [0; 16],
    };

    /// `value`, for columns of `T` only (e.g. `PadValue::of(-100i64)` for
    /// ignored label positions, or a tokenizer's pad id).
    pub fn of<T: Element>(value: T) -> PadValue {
        let mut bytes = [0u8; 16];
        let src = T::as_bytes(std::slice::from_ref(&value));
        bytes[..src.len()].copy_from_slice(src);
        PadValue {
            dtype: Some(T::DTYPE),
            bytes,
        }
    }

    /// One element's bytes for a column of `dtype`.
    pub(crate) fn element(&self, dtype: DType) -> Result<&[u8], Error> {
        match self.dtype {
            Some(d) if d != dtype => Err(Error::invalid(format!(
                "a {d} padding value cannot pad a {dtype} column"
            ))),
            _ => Ok(&self.bytes[..dtype.size()]),
        }
    }
}

/// A padded batch: `values` of shape `(B, max_0, .., max_{ndim-1})`,
/// `lengths` of shape `(B, ndim)` (`i64`, each record's own shape) and
/// `mask` of `values`' shape (`bool`, true inside a record).
///
/// In host memory the three are [`HostArray`]s; adapters map them to their
/// tensor types with [`try_map`](Padded::try_map) or field by field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Padded<V = HostArray, L = V, M = V> {
    /// The records, padded.
    pub values: V,
    /// Each record's extent along every axis.
    pub lengths: L,
    /// True inside a record, false in padding.
    pub mask: M,
}

impl Padded {
    /// The three arrays converted by `f` (values, then lengths, then mask).
    ///
    /// # Errors
    ///
    /// The first error `f` returns.
    pub fn try_map<T, E>(
        self,
        mut f: impl FnMut(HostArray) -> Result<T, E>,
    ) -> Result<Padded<T>, E> {
        Ok(Padded {
            values: f(self.values)?,
            lengths: f(self.lengths)?,
            mask: f(self.mask)?,
        })
    }
}

/// Calls `row(src_element, dst_element, len)` for every innermost row of a
/// C-order record of `shape` placed in the corner of a C-order block of
/// shape `max` (a scalar record is one row of one element).
fn for_each_row(shape: &[usize], max: &[usize], mut row: impl FnMut(usize, usize, usize)) {
    let Some((&last, outer)) = shape.split_last() else {
        row(0, 0, 1);
        return;
    };
    let rows: usize = outer.iter().product();
    let mut index = vec![0usize; outer.len()];
    for r in 0..rows {
        let at = index
            .iter()
            .zip(max)
            .fold(0usize, |acc, (&ix, &m)| acc * m + ix);
        row(r * last, at * max[outer.len()], last);
        for k in (0..index.len()).rev() {
            index[k] += 1;
            if index[k] < outer[k] {
                break;
            }
            index[k] = 0;
        }
    }
}

/// Pads records of `dtype` and rank `ndim`, each given as `(shape, bytes)`
/// (C order, any alignment), to the largest extent of every axis, with
/// `pad` in the padding.
///
/// ```
/// use loaderx_core::DType;
/// use loaderx_core::adapter::{PadValue, pad_records};
///
/// let a = [1u16, 2, 3];
/// let b = [4u16];
/// let records = [(&[3usize][..], bytemuck::cast_slice(&a)), (&[1usize][..], bytemuck::cast_slice(&b))];
/// let p = pad_records(DType::U16, 1, records, PadValue::of(9u16))?;
/// assert_eq!(p.values.as_slice::<u16>()?, &[1, 2, 3, 4, 9, 9]);
/// assert_eq!(p.lengths.as_slice::<i64>()?, &[3, 1]);
/// assert_eq!(p.mask.as_slice::<bool>()?, &[true, true, true, true, false, false]);
/// # Ok::<(), loaderx_core::Error>(())
/// ```
///
/// # Errors
///
/// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) when a
/// record's rank is not `ndim`, its byte count does not match its shape, the
/// pad value is of another type, or the padded block cannot be held in memory
/// (shapes `(0, 10^9)` and `(10^9, 0)` hold no element but pad to `10^18`);
/// [`ErrorKind::Buffer`](crate::ErrorKind::Buffer) when it cannot be allocated.
pub fn pad_records<'a, I>(
    dtype: DType,
    ndim: usize,
    records: I,
    pad: PadValue,
) -> Result<Padded, Error>
where
    I: IntoIterator<Item = (&'a [usize], &'a [u8])>,
    I::IntoIter: Clone,
{
    let records = records.into_iter();
    let size = dtype.size();
    let pad = pad.element(dtype)?;
    let mut max = vec![0usize; ndim];
    let mut lengths = Vec::new();
    let mut b = 0usize;
    for (i, (shape, bytes)) in records.clone().enumerate() {
        if shape.len() != ndim {
            return Err(Error::invalid(format!(
                "record {i} has rank {}, the batch {ndim}",
                shape.len()
            )));
        }
        let elements = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        if elements.and_then(|e| e.checked_mul(size)) != Some(bytes.len()) {
            return Err(Error::invalid(format!(
                "record {i}: {} bytes do not hold a {dtype} record of shape {shape:?}",
                bytes.len()
            )));
        }
        for (m, &d) in max.iter_mut().zip(shape) {
            *m = (*m).max(d);
            lengths.push(i64::try_from(d).map_err(|_| {
                Error::invalid(format!("record {i}: extent {d} does not fit an i64 length"))
            })?);
        }
        b += 1;
    }
    let too_large = || {
        Error::invalid(format!(
            "padding {b} records to the shape {max:?} of {dtype} needs more memory than can \
             be allocated"
        ))
    };
    let per_record = max
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(too_large)?;
    let elements = per_record.checked_mul(b).ok_or_else(too_large)?;
    let total = elements
        .checked_mul(size)
        .filter(|&t| t <= isize::MAX as usize / 2)
        .ok_or_else(too_large)?;
    let mut values = AlignedBuf::zeroed(total)?;
    if pad.iter().any(|&x| x != 0) {
        for e in values.as_bytes_mut().chunks_exact_mut(size) {
            e.copy_from_slice(pad);
        }
    }
    let mut mask = AlignedBuf::zeroed(elements)?;
    let (vb, mb) = (values.as_bytes_mut(), mask.as_bytes_mut());
    for (j, (shape, src)) in records.enumerate() {
        let base = j * per_record;
        for_each_row(shape, &max, |from, to, len| {
            let (s, d) = (from * size, (base + to) * size);
            vb[d..d + len * size].copy_from_slice(&src[s..s + len * size]);
            mb[base + to..base + to + len].fill(1);
        });
    }
    let mut shape = Vec::with_capacity(1 + ndim);
    shape.push(b);
    shape.extend_from_slice(&max);
    Ok(Padded {
        values: HostArray::try_new(dtype, shape.clone(), values)?,
        lengths: HostArray::from_slice(&lengths, vec![b, ndim])?,
        mask: HostArray::try_new(DType::Bool, shape, mask)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The padded value at `(record, position)` by definition.
    fn reference(
        records: &[(Vec<usize>, Vec<i32>)],
        max: &[usize],
        pad: i32,
    ) -> (Vec<i32>, Vec<bool>) {
        let per: usize = max.iter().product();
        let mut values = vec![pad; records.len() * per];
        let mut mask = vec![false; records.len() * per];
        for (j, (shape, data)) in records.iter().enumerate() {
            for (k, &v) in data.iter().enumerate() {
                // Multi-index of element k in the record, placed in `max`.
                let mut rest = k;
                let mut idx = vec![0; shape.len()];
                for a in (0..shape.len()).rev() {
                    idx[a] = rest % shape[a];
                    rest /= shape[a];
                }
                let at = idx.iter().zip(max).fold(0, |acc, (&i, &m)| acc * m + i);
                values[j * per + at] = v;
                mask[j * per + at] = true;
            }
        }
        (values, mask)
    }

    proptest! {
        #[test]
        fn padding_puts_every_element_at_its_index(
            ndim in 0usize..4,
            shapes in proptest::collection::vec(proptest::collection::vec(0usize..4, 3), 0..6),
            pad in any::<i32>(),
        ) {
            let mut next = 0;
            let records: Vec<(Vec<usize>, Vec<i32>)> = shapes.iter().map(|s| {
                let shape = s[..ndim].to_vec();
                let n: usize = shape.iter().product();
                let data = (next..next + n as i32).collect();
                next += n as i32;
                (shape, data)
            }).collect();
            let p = pad_records(
                DType::I32,
                ndim,
                records.iter().map(|(s, d)| (&s[..], bytemuck::cast_slice(d))),
                PadValue::of(pad),
            ).unwrap();
            let max: Vec<usize> = (0..ndim)
                .map(|a| records.iter().map(|(s, _)| s[a]).max().unwrap_or(0))
                .collect();
            let (values, mask) = reference(&records, &max, pad);
            prop_assert_eq!(&p.values.shape()[1..], &max[..]);
            prop_assert_eq!(p.values.as_slice::<i32>().unwrap(), &values[..]);
            prop_assert_eq!(p.mask.as_slice::<bool>().unwrap(), &mask[..]);
            let lengths: Vec<i64> = records.iter().flat_map(|(s, _)| s.iter().map(|&d| d as i64)).collect();
            prop_assert_eq!(p.lengths.as_slice::<i64>().unwrap(), &lengths[..]);
            prop_assert_eq!(p.lengths.shape(), &[records.len(), ndim]);
        }
    }

    #[test]
    fn bad_records_and_huge_blocks_are_errors() {
        let data = [0u8; 4];
        let e =
            pad_records(DType::U8, 1, [(&[3usize][..], &data[..])], PadValue::ZERO).unwrap_err();
        assert!(e.to_string().contains("record 0"), "{e}");
        let e =
            pad_records(DType::U8, 2, [(&[4usize][..], &data[..])], PadValue::ZERO).unwrap_err();
        assert!(e.to_string().contains("rank 1"), "{e}");
        let e = pad_records(
            DType::U16,
            1,
            [(&[2usize][..], &data[..])],
            PadValue::of(1u8),
        )
        .unwrap_err();
        assert!(e.to_string().contains("u8 padding"), "{e}");
        let huge = [
            (&[0usize, 1 << 40][..], &[][..]),
            (&[1 << 40, 0][..], &[][..]),
        ];
        let e = pad_records(DType::U8, 2, huge, PadValue::ZERO).unwrap_err();
        assert!(e.to_string().contains("more memory"), "{e}");
    }
}
