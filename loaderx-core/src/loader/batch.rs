//! What a loader delivers: the step, its indices, and one column per stream.

use std::sync::Arc;

use ndarray::{ArrayViewD, IxDyn};

use super::staging::{ColumnBuffer, PooledBuffer, StagedBuffer};
use crate::adapter::{AlignedBuf, PadValue, Padded};
use crate::dtype::{DType, Element};
use crate::error::{Error, ErrorKind, StoreKind};
use crate::ragged::RaggedLayout;

/// One loader step: the sampler's indices and every stream gathered at
/// them, in buffers of type `B` (the loader's [staging](super::Staging)'s;
/// by default the pooled host buffers of [`BufferPool`](super::BufferPool)).
pub struct Batch<B = PooledBuffer> {
    pub(crate) step: u64,
    pub(crate) epoch: u64,
    pub(crate) step_in_epoch: u64,
    pub(crate) indices: Vec<u64>,
    /// Each record's mixture source, when the loader draws a mixture.
    pub(crate) sources: Option<Vec<u32>>,
    pub(crate) names: Arc<[String]>,
    pub(crate) columns: Vec<Column<B>>,
}

impl<B: StagedBuffer> Batch<B> {
    /// The sampler step this batch is.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// The pass over the data this batch belongs to (0-based).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The batch's position in its pass (0-based); the last batch of a pass
    /// is at `steps_per_epoch - 1`.
    pub fn step_in_epoch(&self) -> u64 {
        self.step_in_epoch
    }

    /// The record indices, in batch order; identical for every stream. With
    /// `drop_last(false)` the last batch of a pass holds fewer than
    /// `batch_size`.
    pub fn indices(&self) -> &[u64] {
        &self.indices
    }

    /// For a loader drawing a [mixture](crate::DataLoaderBuilder::mixture):
    /// the source of every record (its position among the mixture's
    /// sources), in batch order; `None` otherwise.
    pub fn sources(&self) -> Option<&[u32]> {
        self.sources.as_deref()
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.indices.len()
    }

    /// True for an empty batch (never produced by a loader).
    pub fn is_empty(&self) -> bool {
        self.indices.is_empty()
    }

    /// Stream names, in the order the loader was built with.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The column of stream `name`.
    pub fn column(&self, name: &str) -> Option<&Column<B>> {
        let i = self.names.iter().position(|n| n == name)?;
        self.columns.get(i)
    }

    /// Every column, in stream order.
    pub fn columns(&self) -> &[Column<B>] {
        &self.columns
    }

    /// Takes the columns out, in stream order, paired with their names.
    pub fn into_columns(self) -> Vec<(String, Column<B>)> {
        self.names.iter().cloned().zip(self.columns).collect()
    }

    /// Dense stream `name` as a `(B, *item_shape)` view of element type `T`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) when the batch
    /// has no stream `name`, and as [`Column::dense`].
    pub fn dense<T: Element>(&self, name: &str) -> Result<ArrayViewD<'_, T>, Error> {
        self.require(name)?.dense()
    }

    fn require(&self, name: &str) -> Result<&Column<B>, Error> {
        self.column(name)
            .ok_or_else(|| Error::invalid(format!("the batch has no stream {name:?}")))
    }

    /// Ragged stream `name`: one view per record.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) when the batch
    /// has no stream `name`, and as [`Column::ragged`].
    pub fn ragged<T: Element>(&self, name: &str) -> Result<Vec<ArrayViewD<'_, T>>, Error> {
        self.require(name)?.ragged()
    }
}

impl<B> std::fmt::Debug for Batch<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch")
            .field("step", &self.step)
            .field("epoch", &self.epoch)
            .field("len", &self.indices.len())
            .field("streams", &self.names)
            .finish()
    }
}

/// How a column's bytes are laid out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnLayout {
    /// Contiguous `(B, *item_shape)` C-order elements.
    Dense {
        /// `(B, *item_shape)`.
        shape: Vec<usize>,
    },
    /// One segment per record; see [`RaggedLayout`].
    Ragged(RaggedLayout),
}

/// One stream's part of a batch, in the buffer its staging provided (of
/// type `B`), or in host memory core made.
pub struct Column<B = PooledBuffer> {
    pub(crate) dtype: DType,
    pub(crate) layout: ColumnLayout,
    pub(crate) len: usize,
    pub(crate) buffer: ColumnBuffer<B>,
}

impl<B: StagedBuffer> Column<B> {
    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Dense or Ragged.
    pub fn kind(&self) -> StoreKind {
        match self.layout {
            ColumnLayout::Dense { .. } => StoreKind::Dense,
            ColumnLayout::Ragged(_) => StoreKind::Ragged,
        }
    }

    /// The layout.
    pub fn layout(&self) -> &ColumnLayout {
        &self.layout
    }

    /// The batch shape of a Dense column.
    pub fn shape(&self) -> Option<&[usize]> {
        match &self.layout {
            ColumnLayout::Dense { shape } => Some(shape),
            ColumnLayout::Ragged(_) => None,
        }
    }

    /// The `(B, *item_shape)` shape of a Dense column.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::ColumnKind`](crate::ErrorKind::ColumnKind) for a Ragged column.
    pub fn dense_shape(&self) -> Result<&[usize], Error> {
        match &self.layout {
            ColumnLayout::Dense { shape } => Ok(shape),
            ColumnLayout::Ragged(_) => Err(kind_error(StoreKind::Dense, StoreKind::Ragged)),
        }
    }

    /// The record layout of a Ragged column.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::ColumnKind`](crate::ErrorKind::ColumnKind) for a Dense column.
    pub fn ragged_layout(&self) -> Result<&RaggedLayout, Error> {
        match &self.layout {
            ColumnLayout::Ragged(layout) => Ok(layout),
            ColumnLayout::Dense { .. } => Err(kind_error(StoreKind::Ragged, StoreKind::Dense)),
        }
    }

    /// The gathered bytes (Dense: the whole contiguous batch).
    pub fn bytes(&self) -> &[u8] {
        &self.buffer.as_bytes()[..self.len]
    }

    fn typed<'a, T: Element>(&self, bytes: &'a [u8]) -> Result<&'a [T], Error> {
        if self.dtype != T::DTYPE {
            return Err(Error::invalid(format!(
                "column holds {}, asked for {}",
                self.dtype,
                T::DTYPE
            )));
        }
        T::try_from_bytes(bytes).ok_or_else(|| {
            Error::invalid(format!(
                "column bytes are misaligned or not valid {} values",
                T::DTYPE
            ))
        })
    }

    /// A Dense column as a `(B, *item_shape)` view.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::ColumnKind`](crate::ErrorKind::ColumnKind) for a Ragged column;
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) when `T` is
    /// not the column's element type or its bytes are not valid, aligned `T` values.
    pub fn dense<T: Element>(&self) -> Result<ArrayViewD<'_, T>, Error> {
        let shape = self.dense_shape()?;
        let data = self.typed::<T>(self.bytes())?;
        ArrayViewD::from_shape(IxDyn(shape), data).map_err(|e| Error::invalid(e.to_string()))
    }

    /// A Ragged column as one view per record.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::ColumnKind`](crate::ErrorKind::ColumnKind) for a Dense column;
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) when `T` is
    /// not the column's element type or its bytes are not valid, aligned `T` values.
    pub fn ragged<T: Element>(&self) -> Result<Vec<ArrayViewD<'_, T>>, Error> {
        let layout = self.ragged_layout()?;
        let bytes = self.bytes();
        (0..layout.len())
            .map(|i| {
                let data = self.typed::<T>(&bytes[layout.byte_range(i)])?;
                ArrayViewD::from_shape(IxDyn(layout.shape(i)), data)
                    .map_err(|e| Error::invalid(e.to_string()))
            })
            .collect()
    }

    /// Any column as one view per record: a Dense column's rows, or a
    /// Ragged column's records.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) when `T`
    /// is not the column's element type or its bytes are not valid, aligned `T`
    /// values.
    pub fn record_views<T: Element>(&self) -> Result<Vec<ArrayViewD<'_, T>>, Error> {
        self.records()
            .map(|(shape, bytes)| {
                ArrayViewD::from_shape(IxDyn(shape), self.typed::<T>(bytes)?)
                    .map_err(|e| Error::invalid(e.to_string()))
            })
            .collect()
    }

    /// Each record's `(shape, bytes)`: a Dense column's rows, or a Ragged
    /// column's records.
    pub fn records(&self) -> impl ExactSizeIterator<Item = (&[usize], &[u8])> + Clone + '_ {
        let bytes = self.bytes();
        let (item_shape, row, layout): (&[usize], usize, Option<&RaggedLayout>) = match &self.layout
        {
            ColumnLayout::Dense { shape } => {
                let item = shape.get(1..).unwrap_or_default();
                (
                    item,
                    item.iter().product::<usize>() * self.dtype.size(),
                    None,
                )
            }
            ColumnLayout::Ragged(l) => (&[], 0, Some(l)),
        };
        let n = match (&self.layout, layout) {
            (_, Some(l)) => l.len(),
            (ColumnLayout::Dense { shape }, None) => shape.first().copied().unwrap_or(0),
            _ => 0,
        };
        (0..n).map(move |i| match layout {
            Some(l) => (l.shape(i), &bytes[l.byte_range(i)]),
            None => (item_shape, &bytes[i * row..(i + 1) * row]),
        })
    }

    /// The column padded to the largest extent of every axis, with `i64`
    /// lengths and a `bool` mask (see [`host::pad_records`](crate::adapter::pad_records));
    /// a Dense column pads to itself, with full lengths and an all-true mask.
    ///
    /// # Errors
    ///
    /// As [`host::pad_records`](crate::adapter::pad_records).
    pub fn padded(&self, pad: PadValue) -> Result<Padded, Error> {
        let ndim = match &self.layout {
            ColumnLayout::Dense { shape } => shape.len().saturating_sub(1),
            ColumnLayout::Ragged(l) => l.ndim(),
        };
        crate::adapter::pad_records(self.dtype, ndim, self.records(), pad)
    }

    /// Bytes of an array of `shape` in the column's element type, the
    /// first bytes of its buffer that
    /// [`ColumnConverter::buffer_tensor`](crate::adapter::ColumnConverter::buffer_tensor)
    /// hands over.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument)
    /// when the column holds fewer bytes.
    pub fn array_len(&self, shape: &[usize]) -> Result<usize, Error> {
        shape
            .iter()
            .try_fold(self.dtype.size(), |a, &d| a.checked_mul(d))
            .filter(|&n| n <= self.len)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "a {}-byte column cannot hold a {} array of shape {shape:?}",
                    self.len, self.dtype
                ))
            })
    }

    /// A Ragged column as `values`, `cu_seqlens` and `shapes` in host
    /// memory (see [`PackedRagged`](crate::adapter::PackedRagged)); the values
    /// are copied. To hand a batch gathered
    /// [`packed`](crate::DataLoaderBuilder::packed) to a framework without
    /// a copy, an adapter takes the column's buffer as the values
    /// ([`ColumnConverter::packed`](crate::adapter::ColumnConverter::packed)).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::ColumnKind`](crate::ErrorKind::ColumnKind) for a Dense
    /// column; as [`RaggedLayout::packed`] (more than `i32::MAX` elements, a
    /// dimension above `u32::MAX`).
    pub fn packed(&self) -> Result<crate::adapter::PackedRagged, Error> {
        self.ragged_layout()?.packed(self.dtype, self.bytes())
    }

    /// A Ragged column's elements end to end: its own bytes when it was
    /// gathered [`packed`](crate::DataLoaderBuilder::packed), a copy
    /// otherwise (see [`RaggedLayout::packed_values`]).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::ColumnKind`](crate::ErrorKind::ColumnKind) for a Dense
    /// column.
    pub fn packed_values(&self) -> Result<std::borrow::Cow<'_, [u8]>, Error> {
        self.ragged_layout()?.packed_values(self.bytes())
    }

    /// Where the column's bytes live: its staging's buffer, or host memory
    /// core made.
    pub fn buffer(&self) -> &ColumnBuffer<B> {
        &self.buffer
    }

    /// The buffer, e.g. for an adapter to take back its own staged memory
    /// (a tensor's storage, a pinned block) without a copy.
    pub fn into_buffer(self) -> ColumnBuffer<B> {
        self.buffer
    }
}

impl<B> Column<B> {
    /// A column of `dtype` and contract `kind` holding `records`, each a
    /// `(shape, bytes)` pair, copied into one new aligned buffer: the inverse
    /// of [`records`](Self::records). Dense records lie contiguous and must
    /// share one shape (the column is `(B, *shape)`; `(0,)` without records);
    /// Ragged records each start 8-byte aligned and must share one rank.
    /// The buffer is host memory ([`ColumnBuffer::Host`]), so the column can
    /// stand beside any staging's columns (`B`).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) when
    /// Dense records differ in shape or Ragged ones in rank, or a record's byte
    /// count is not its shape's element count times `dtype.size()`;
    /// [`ErrorKind::Buffer`](crate::ErrorKind::Buffer) when the buffer cannot be
    /// had.
    pub fn stack<'a>(
        dtype: DType,
        kind: StoreKind,
        records: impl IntoIterator<Item = (&'a [usize], &'a [u8])>,
    ) -> Result<Column<B>, Error> {
        let records: Vec<(&[usize], &[u8])> = records.into_iter().collect();
        let first: &[usize] = records.first().map_or(&[], |r| r.0);
        let mut ranges = Vec::with_capacity(records.len());
        let mut end = 0usize;
        for &(shape, bytes) in &records {
            let want = shape
                .iter()
                .try_fold(dtype.size(), |a, &d| a.checked_mul(d));
            if want != Some(bytes.len()) {
                return Err(Error::invalid(format!(
                    "{} bytes do not hold a {dtype} record of shape {shape:?}",
                    bytes.len()
                )));
            }
            match kind {
                StoreKind::Dense if shape != first => {
                    return Err(Error::invalid(format!(
                        "dense records of shapes {first:?} and {shape:?}"
                    )));
                }
                StoreKind::Ragged if shape.len() != first.len() => {
                    return Err(Error::invalid(format!(
                        "ragged records of ranks {} and {}",
                        first.len(),
                        shape.len()
                    )));
                }
                _ => {}
            }
            let start = match kind {
                StoreKind::Dense => end,
                StoreKind::Ragged => end.next_multiple_of(8),
            };
            end = start
                .checked_add(bytes.len())
                .ok_or_else(|| Error::invalid("the stacked records are larger than memory"))?;
            ranges.push(start..end);
        }
        let mut buffer = AlignedBuf::zeroed(end)?;
        for (range, (_, bytes)) in ranges.iter().zip(&records) {
            buffer.as_bytes_mut()[range.clone()].copy_from_slice(bytes);
        }
        let layout = match kind {
            StoreKind::Dense => {
                let mut shape = Vec::with_capacity(1 + first.len());
                shape.push(records.len());
                shape.extend_from_slice(first);
                ColumnLayout::Dense { shape }
            }
            StoreKind::Ragged => {
                let dims = records.iter().flat_map(|r| r.0.iter().copied()).collect();
                ColumnLayout::Ragged(RaggedLayout::try_new(
                    first.len(),
                    dims,
                    &ranges,
                    dtype.size(),
                    end,
                )?)
            }
        };
        Ok(Column {
            dtype,
            layout,
            len: end,
            buffer: ColumnBuffer::Host(buffer),
        })
    }
}

fn kind_error(expected: StoreKind, found: StoreKind) -> Error {
    ErrorKind::ColumnKind { expected, found }.into()
}

impl<B> std::fmt::Debug for Column<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Column")
            .field("dtype", &self.dtype)
            .field("layout", &self.layout)
            .field("bytes", &self.len)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(values: &[u16]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    #[test]
    fn stacking_inverts_records() {
        let (a, b) = (bytes(&[1, 2, 3]), bytes(&[4]));
        let ragged = Column::<PooledBuffer>::stack(
            DType::U16,
            StoreKind::Ragged,
            [(&[3][..], &a[..]), (&[1][..], &b[..])],
        )
        .unwrap();
        assert_eq!(ragged.kind(), StoreKind::Ragged);
        let views = ragged.record_views::<u16>().unwrap();
        assert_eq!(views[0].as_slice().unwrap(), &[1, 2, 3]);
        assert_eq!(views[1].as_slice().unwrap(), &[4]);
        let again: Vec<_> = ragged.records().collect();
        assert_eq!(again, [(&[3][..], &a[..]), (&[1][..], &b[..])]);

        let rows = [bytes(&[1, 2]), bytes(&[3, 4])];
        let dense = Column::<PooledBuffer>::stack(
            DType::U16,
            StoreKind::Dense,
            rows.iter().map(|r| (&[2][..], &r[..])),
        )
        .unwrap();
        assert_eq!(dense.shape(), Some(&[2, 2][..]));
        assert_eq!(dense.dense::<u16>().unwrap()[[1, 0]], 3);
        assert_eq!(
            dense.record_views::<u16>().unwrap()[1].as_slice().unwrap(),
            &[3, 4]
        );
        assert!(dense.record_views::<i16>().is_err());
        let empty = Column::<PooledBuffer>::stack(DType::U16, StoreKind::Dense, []).unwrap();
        assert_eq!(empty.shape(), Some(&[0][..]));
    }

    #[test]
    fn the_other_contract_is_a_column_kind_error() {
        let a = bytes(&[1, 2]);
        let dense =
            Column::<PooledBuffer>::stack(DType::U16, StoreKind::Dense, [(&[2][..], &a[..])])
                .unwrap();
        let ragged =
            Column::<PooledBuffer>::stack(DType::U16, StoreKind::Ragged, [(&[2][..], &a[..])])
                .unwrap();
        assert_eq!(dense.dense_shape().unwrap(), &[1, 2]);
        assert_eq!(ragged.ragged_layout().unwrap().len(), 1);
        let kind = |e: Error| match e.into_kind() {
            ErrorKind::ColumnKind { expected, found } => (expected, found),
            other => panic!("{other}"),
        };
        let dense_wanted = (StoreKind::Dense, StoreKind::Ragged);
        let ragged_wanted = (StoreKind::Ragged, StoreKind::Dense);
        assert_eq!(kind(ragged.dense_shape().unwrap_err()), dense_wanted);
        assert_eq!(kind(ragged.dense::<u16>().unwrap_err()), dense_wanted);
        assert_eq!(kind(dense.ragged_layout().unwrap_err()), ragged_wanted);
        assert_eq!(kind(dense.ragged::<u16>().unwrap_err()), ragged_wanted);
        let e = dense.ragged_layout().unwrap_err();
        assert_eq!(e.to_string(), "column is dense, expected ragged");
    }

    #[test]
    fn stacking_refuses_disagreeing_records() {
        let (a, b) = (bytes(&[1, 2]), bytes(&[3]));
        let e = Column::<PooledBuffer>::stack(
            DType::U16,
            StoreKind::Dense,
            [(&[2][..], &a[..]), (&[1][..], &b[..])],
        )
        .unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::InvalidArgument { .. }), "{e}");
        let e = Column::<PooledBuffer>::stack(
            DType::U16,
            StoreKind::Ragged,
            [(&[2][..], &a[..]), (&[1, 1][..], &b[..])],
        )
        .unwrap_err();
        assert!(e.to_string().contains("ranks 1 and 2"), "{e}");
        // Bytes that do not hold the shape.
        assert!(
            Column::<PooledBuffer>::stack(DType::U16, StoreKind::Ragged, [(&[3][..], &a[..])])
                .is_err()
        );
    }
}
