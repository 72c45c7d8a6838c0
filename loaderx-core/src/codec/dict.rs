//! Training the shared dictionary of `zstd_dict` stores.
//!
//! The contract is fixed, as in Python loaderx: a dictionary of at most
//! [`DICT_MAX_BYTES`] trained by zstd's ZDICT from a sample of at most
//! [`DICT_SAMPLE_BYTES`]. Arrays and open stores are sampled at evenly strided
//! record positions; an iterator contributes its leading records.

use std::borrow::Cow;

use ndarray::{ArrayBase, Axis, Data, Dimension};

use crate::dtype::Element;
use crate::error::{Error, ErrorKind};

/// Largest dictionary `train_dict` makes (32 KiB).
pub const DICT_MAX_BYTES: usize = 32 << 10;
/// Largest training sample (4 MiB).
pub const DICT_SAMPLE_BYTES: usize = 4 << 20;

/// A record whose element bytes can train a dictionary.
pub trait AsRecordBytes {
    /// The record's C-order little-endian bytes.
    fn record_bytes(&self) -> Cow<'_, [u8]>;
}

impl<T: Element> AsRecordBytes for [T] {
    fn record_bytes(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(T::as_bytes(self))
    }
}

impl<T: Element> AsRecordBytes for Vec<T> {
    fn record_bytes(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(T::as_bytes(self))
    }
}

impl<T: Element, S: Data<Elem = T>, D: Dimension> AsRecordBytes for ArrayBase<S, D> {
    fn record_bytes(&self) -> Cow<'_, [u8]> {
        match self.as_slice() {
            Some(s) => Cow::Borrowed(T::as_bytes(s)),
            None => Cow::Owned(T::as_bytes(&self.iter().copied().collect::<Vec<T>>()).to_vec()),
        }
    }
}

impl<R: AsRecordBytes + ?Sized> AsRecordBytes for &R {
    fn record_bytes(&self) -> Cow<'_, [u8]> {
        (**self).record_bytes()
    }
}

fn dict_error(detail: impl Into<String>) -> Error {
    ErrorKind::Dictionary {
        detail: detail.into(),
    }
    .into()
}

/// Trains a dictionary on the leading records of `records`, up to
/// [`DICT_SAMPLE_BYTES`].
///
/// ```
/// let records: Vec<Vec<i32>> = (0..2000).map(|i| (0..64).map(|j| (i * j) % 97).collect()).collect();
/// let dict = loaderx_core::train_dict(&records)?;
/// assert!(!dict.is_empty() && dict.len() <= loaderx_core::DICT_MAX_BYTES);
/// # Ok::<(), loaderx_core::Error>(())
/// ```
///
/// # Errors
///
/// [`ErrorKind::Dictionary`](crate::ErrorKind::Dictionary) when the records cannot
/// train one (none, or zero-byte records, or a first record larger than the 4 MiB
/// sample budget, or zstd's trainer fails).
pub fn train_dict<I>(records: I) -> Result<Vec<u8>, Error>
where
    I: IntoIterator,
    I::Item: AsRecordBytes,
{
    let mut data = Vec::new();
    let mut sizes = Vec::new();
    for record in records {
        let bytes = record.record_bytes();
        if bytes.is_empty() {
            return Err(dict_error("zero-byte records cannot train a dictionary"));
        }
        if bytes.len() > DICT_SAMPLE_BYTES - data.len() {
            if sizes.is_empty() {
                return Err(dict_error("one record exceeds the 4 MiB sample budget"));
            }
            break;
        }
        data.extend_from_slice(&bytes);
        sizes.push(bytes.len());
        if data.len() == DICT_SAMPLE_BYTES {
            break;
        }
    }
    train_from_samples(&data, &sizes)
}

/// Trains a dictionary on an evenly strided sample of the records of `batch`
/// (one record per index of axis 0).
///
/// # Errors
///
/// [`ErrorKind::Dictionary`](crate::ErrorKind::Dictionary) for an empty array,
/// zero-byte records, or when zstd's trainer fails.
pub fn train_dict_from_array<T, S, D>(batch: &ArrayBase<S, D>) -> Result<Vec<u8>, Error>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
{
    if batch.ndim() == 0 || batch.len_of(Axis(0)) == 0 {
        return Err(dict_error("cannot train a dictionary on an empty array"));
    }
    let n = batch.len_of(Axis(0));
    let item = batch.len() / n * size_of::<T>();
    if item == 0 {
        return Err(dict_error("zero-byte records cannot train a dictionary"));
    }
    if item > DICT_SAMPLE_BYTES {
        return Err(dict_error("one record exceeds the 4 MiB sample budget"));
    }
    let batch = batch.view().into_dyn();
    let mut data = Vec::new();
    let mut sizes = Vec::new();
    for i in strided_sample(n, item) {
        data.extend_from_slice(&batch.index_axis(Axis(0), i).record_bytes());
        sizes.push(item);
    }
    train_from_samples(&data, &sizes)
}

/// Record positions of an evenly strided sample of `n` records of about
/// `item_bytes` each, bounded by [`DICT_SAMPLE_BYTES`]: NumPy's
/// `unique(linspace(0, n - 1, k).astype(int64))`, as Python loaderx samples.
pub(crate) fn strided_sample(n: usize, item_bytes: usize) -> Vec<usize> {
    if n == 0 {
        return Vec::new();
    }
    let k = n.min((DICT_SAMPLE_BYTES / item_bytes.max(1)).max(1));
    if k == 1 {
        return vec![0];
    }
    let step = (n - 1) as f64 / (k - 1) as f64;
    let mut out: Vec<usize> = (0..k)
        .map(|i| {
            if i == k - 1 {
                n - 1
            } else {
                (i as f64 * step) as usize
            }
        })
        .collect();
    out.dedup();
    out
}

/// Runs ZDICT over concatenated samples.
pub(crate) fn train_from_samples(data: &[u8], sizes: &[usize]) -> Result<Vec<u8>, Error> {
    if sizes.is_empty() {
        return Err(dict_error("training needs at least one record"));
    }
    let dict = zstd::dict::from_continuous(data, sizes, DICT_MAX_BYTES).map_err(|e| {
        dict_error(format!(
            "zstd could not train on {} records: {e}",
            sizes.len()
        ))
    })?;
    if dict.is_empty() {
        return Err(dict_error("zstd produced an empty dictionary"));
    }
    Ok(dict)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strided_sample_matches_numpy_linspace() {
        assert_eq!(strided_sample(1, 10), vec![0]);
        assert_eq!(strided_sample(5, 1), vec![0, 1, 2, 3, 4]);
        // np.unique(np.linspace(0, 9, 4).astype(np.int64)) == [0, 3, 6, 9]
        assert_eq!(strided_sample(10, DICT_SAMPLE_BYTES / 4), vec![0, 3, 6, 9]);
        let big = strided_sample(1_000_000, 784);
        assert_eq!(big.len(), DICT_SAMPLE_BYTES / 784);
        assert_eq!(*big.last().unwrap(), 999_999);
        assert!(big.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn trains_bounded_dictionaries() {
        let recs: Vec<Vec<u16>> = (0..3000u16)
            .map(|i| (0..100).map(|j| (i % 13) * 7 + j % 11).collect())
            .collect();
        let d = train_dict(&recs).unwrap();
        assert!(!d.is_empty() && d.len() <= DICT_MAX_BYTES);
        let arr =
            ndarray::Array2::from_shape_fn((3000, 100), |(i, j)| ((i % 13) * 7 + j % 11) as u16);
        let d2 = train_dict_from_array(&arr).unwrap();
        assert!(d2.len() <= DICT_MAX_BYTES);
        assert!(train_dict(Vec::<Vec<u8>>::new()).is_err());
        assert!(train_dict([Vec::<u8>::new()]).is_err());
    }
}
