//! [`PackedRagged`]: a Ragged batch as three arrays, values end to end.

use super::HostArray;

/// A Ragged batch packed, the layout variable-length attention kernels
/// and Python loaderx 2.8.19's `RaggedBatch` use, with no padding:
///
/// - `values`: every record's elements end to end, 1-D, in the store's
///   element type;
/// - `cu_seqlens`: `i32`, one more than the records: record `i`'s
///   elements are `values[cu_seqlens[i]..cu_seqlens[i + 1]]` (the first is
///   0, the last the element count);
/// - `shapes`: `u32`, `(records, ndim)`: every record's shape.
///
/// (Not to be confused with [`sequence`](crate::sequence) packing, which
/// fills fixed-length rows with several records.) In host memory the three
/// are [`HostArray`]s; adapters map them to their tensors with
/// [`try_map`](PackedRagged::try_map) or field by field.
///
/// ```
/// use loaderx_core::{Codec, Ragged, RaggedWriter};
///
/// let dir = tempfile::tempdir()?;
/// let mut w = RaggedWriter::<i32>::create(dir.path().join("tok"), 2, Codec::Zstd)?;
/// w.append_packed(&[3, 5, 7, 11, 13, 17, 19], &[0, 2, 6, 7], &[1, 2, 2, 2, 1, 1])?;
/// w.close()?;
/// let tok = Ragged::<i32>::open(dir.path().join("tok"))?;
/// let batch = tok.gather_packed(&[2, 0])?; // values end to end, no headers
/// let p = batch.into_dyn().packed()?;
/// assert_eq!(p.values.as_slice::<i32>()?, &[19, 3, 5]);
/// assert_eq!(p.cu_seqlens.as_slice::<i32>()?, &[0, 1, 3]);
/// assert_eq!(p.shapes.as_slice::<u32>()?, &[1, 1, 1, 2]);
/// assert_eq!(p.shapes.shape(), &[2, 2]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedRagged<V = HostArray, C = V, S = V> {
    /// Every record's elements end to end, 1-D.
    pub values: V,
    /// `i32` record offsets into `values`, in elements: records + 1.
    pub cu_seqlens: C,
    /// `u32` shapes, `(records, ndim)`.
    pub shapes: S,
}

impl PackedRagged {
    /// The three arrays converted by `f` (values, then `cu_seqlens`, then
    /// shapes).
    ///
    /// # Errors
    ///
    /// The first error `f` returns.
    pub fn try_map<T, E>(
        self,
        mut f: impl FnMut(HostArray) -> Result<T, E>,
    ) -> Result<PackedRagged<T>, E> {
        Ok(PackedRagged {
            values: f(self.values)?,
            cu_seqlens: f(self.cu_seqlens)?,
            shapes: f(self.shapes)?,
        })
    }
}
