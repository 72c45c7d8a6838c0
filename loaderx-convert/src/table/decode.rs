//! Arrow arrays to record bytes: numbers and nested lists.
//!
//! Every record becomes its shape plus its C-order little-endian bytes.
//! Nulls anywhere and non-rectangular nested lists are errors: nothing is
//! dropped or padded.

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float16Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type,
    UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{Array, ArrowPrimitiveType, BooleanArray};
use arrow_schema::DataType;

/// A decoding failure: what is wrong and, when one row is at fault, its
/// index in the split (the converter's error carries it as `row`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DecodeError {
    /// The split row at fault, if one is.
    pub(crate) row: Option<u64>,
    /// What is wrong (without the row).
    pub(crate) detail: String,
}

impl DecodeError {
    /// A failure of row `row`.
    pub(crate) fn at(row: u64, detail: impl Into<String>) -> DecodeError {
        DecodeError {
            row: Some(row),
            detail: detail.into(),
        }
    }
}

impl From<String> for DecodeError {
    fn from(detail: String) -> DecodeError {
        DecodeError { row: None, detail }
    }
}

impl From<&str> for DecodeError {
    fn from(detail: &str) -> DecodeError {
        DecodeError::from(detail.to_owned())
    }
}

/// Records decoded but not yet written: concatenated bytes, flattened
/// shapes (`ndim` per record) and each record's end offset.
#[derive(Debug, Clone, Default)]
pub(crate) struct RecordBuffer {
    ndim: usize,
    pub(crate) data: Vec<u8>,
    shapes: Vec<usize>,
    ends: Vec<usize>,
}

impl RecordBuffer {
    /// An empty buffer for records of rank `ndim`.
    pub(crate) fn new(ndim: usize) -> RecordBuffer {
        RecordBuffer {
            ndim,
            ..RecordBuffer::default()
        }
    }

    /// Records held.
    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    /// Bytes held (payload and bookkeeping).
    pub(crate) fn bytes(&self) -> usize {
        self.data.len() + 8 * (self.shapes.len() + self.ends.len())
    }

    /// Adds a record whose bytes were already pushed onto `data`.
    pub(crate) fn finish_record(&mut self, shape: &[usize]) {
        debug_assert_eq!(shape.len(), self.ndim);
        self.shapes.extend_from_slice(shape);
        self.ends.push(self.data.len());
    }

    /// Adds a whole record.
    pub(crate) fn push(&mut self, shape: &[usize], bytes: &[u8]) {
        self.data.extend_from_slice(bytes);
        self.finish_record(shape);
    }

    /// Record `i` as `(shape, bytes)`.
    pub(crate) fn record(&self, i: usize) -> (&[usize], &[u8]) {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        (
            &self.shapes[i * self.ndim..(i + 1) * self.ndim],
            &self.data[start..self.ends[i]],
        )
    }

    /// Iterates over the records.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&[usize], &[u8])> + '_ {
        (0..self.len()).map(|i| self.record(i))
    }

    /// Empties the buffer, keeping its allocations.
    pub(crate) fn clear(&mut self) {
        self.data.clear();
        self.shapes.clear();
        self.ends.clear();
    }
}

/// Appends native-endian elements of `width` bytes as little-endian.
fn push_le(out: &mut Vec<u8>, native: &[u8], width: usize) {
    let start = out.len();
    out.extend_from_slice(native);
    if cfg!(target_endian = "big") && width > 1 {
        for chunk in out[start..].chunks_exact_mut(width) {
            chunk.reverse();
        }
    }
}

/// The leaf values of a nested column.
enum Leaf<'a> {
    Bool(&'a BooleanArray),
    Fixed { bytes: &'a [u8], width: usize },
}

fn primitive<T: ArrowPrimitiveType>(array: &dyn Array) -> Option<Leaf<'_>> {
    array.as_primitive_opt::<T>().map(|a| Leaf::Fixed {
        bytes: a.values().inner().as_slice(),
        width: std::mem::size_of::<T::Native>(),
    })
}

fn leaf(array: &dyn Array) -> Option<Leaf<'_>> {
    match array.data_type() {
        DataType::Boolean => array.as_boolean_opt().map(Leaf::Bool),
        DataType::Int8 => primitive::<Int8Type>(array),
        DataType::Int16 => primitive::<Int16Type>(array),
        DataType::Int32 => primitive::<Int32Type>(array),
        DataType::Int64 => primitive::<Int64Type>(array),
        DataType::UInt8 => primitive::<UInt8Type>(array),
        DataType::UInt16 => primitive::<UInt16Type>(array),
        DataType::UInt32 => primitive::<UInt32Type>(array),
        DataType::UInt64 => primitive::<UInt64Type>(array),
        DataType::Float16 => primitive::<Float16Type>(array),
        DataType::Float32 => primitive::<Float32Type>(array),
        DataType::Float64 => primitive::<Float64Type>(array),
        _ => None,
    }
}

/// Where the children of list element `i` are in the child array.
enum Offsets<'a> {
    I32(&'a [i32]),
    I64(&'a [i64]),
    Fixed(usize),
}

impl Offsets<'_> {
    fn range(&self, i: usize) -> (usize, usize) {
        match self {
            // Arrow guarantees non-negative, non-decreasing offsets.
            Offsets::I32(o) => (o[i] as usize, o[i + 1] as usize),
            Offsets::I64(o) => (o[i] as usize, o[i + 1] as usize),
            Offsets::Fixed(n) => (i * n, (i + 1) * n),
        }
    }
}

struct Level<'a> {
    array: &'a dyn Array,
    offsets: Offsets<'a>,
}

/// Decodes rows of one numeric column into `out`.
///
/// `dims` gives, per list level, the fixed length or `None`; `first_row` is
/// the index of `column`'s first row in its split (for messages). Errors
/// are plain sentences, to be prefixed with the column name and the row.
pub(crate) fn decode_numeric(
    column: &dyn Array,
    dims: &[Option<usize>],
    first_row: u64,
    out: &mut RecordBuffer,
) -> Result<(), DecodeError> {
    let mut levels: Vec<Level<'_>> = Vec::with_capacity(dims.len());
    let mut current: &dyn Array = column;
    for _ in dims {
        let (offsets, child) = match current.data_type() {
            DataType::List(_) => {
                let l = current.as_list::<i32>();
                (Offsets::I32(l.value_offsets()), l.values().as_ref())
            }
            DataType::LargeList(_) => {
                let l = current.as_list::<i64>();
                (Offsets::I64(l.value_offsets()), l.values().as_ref())
            }
            DataType::FixedSizeList(_, n) => {
                let l = current.as_fixed_size_list();
                let n = usize::try_from(*n).map_err(|_| "negative list size")?;
                (Offsets::Fixed(n), l.values().as_ref())
            }
            other => return Err(format!("expected a list, found {other}").into()),
        };
        levels.push(Level {
            array: current,
            offsets,
        });
        current = child;
    }
    let leaf_array = current;
    let values = leaf(leaf_array)
        .ok_or_else(|| format!("values of type {} cannot be stored", leaf_array.data_type()))?;

    // Fast path: scalars without nulls are one contiguous copy.
    if levels.is_empty() {
        if column.null_count() > 0 {
            let row = (0..column.len()).find(|&i| column.is_null(i)).unwrap_or(0);
            return Err(null_row(first_row + row as u64));
        }
        match values {
            Leaf::Fixed { bytes, width } => {
                for record in bytes.chunks_exact(width) {
                    push_le(&mut out.data, record, width);
                    out.finish_record(&[]);
                }
            }
            Leaf::Bool(b) => {
                for i in 0..b.len() {
                    out.data.push(u8::from(b.value(i)));
                    out.finish_record(&[]);
                }
            }
        }
        return Ok(());
    }

    let mut shape = vec![0usize; dims.len()];
    for row in 0..column.len() {
        let row_id = first_row + row as u64;
        let (mut start, mut end) = (row, row + 1);
        for (k, level) in levels.iter().enumerate() {
            let mut length = None;
            for i in start..end {
                if level.array.is_null(i) {
                    return Err(null_row(row_id));
                }
                let (a, b) = level.offsets.range(i);
                match length {
                    None => length = Some(b - a),
                    Some(l) if l != b - a => {
                        return Err(DecodeError::at(
                            row_id,
                            format!(
                                "not rectangular: lists of lengths {l} and {} at depth {k}",
                                b - a
                            ),
                        ));
                    }
                    Some(_) => {}
                }
            }
            // Lists below an empty list have no length of their own.
            let length = length.or(dims[k]).unwrap_or(0);
            if let Some(want) = dims[k]
                && length != want
            {
                return Err(DecodeError::at(
                    row_id,
                    format!("length {length} at depth {k}, the feature declares {want}"),
                ));
            }
            shape[k] = length;
            if start < end {
                (start, end) = (level.offsets.range(start).0, level.offsets.range(end - 1).1);
            } else {
                (start, end) = (0, 0);
            }
        }
        if leaf_array.null_count() > 0 && (start..end).any(|i| leaf_array.is_null(i)) {
            return Err(null_row(row_id));
        }
        match &values {
            Leaf::Fixed { bytes, width } => {
                push_le(&mut out.data, &bytes[start * width..end * width], *width);
            }
            Leaf::Bool(b) => out.data.extend((start..end).map(|i| u8::from(b.value(i)))),
        }
        out.finish_record(&shape);
    }
    Ok(())
}

/// Decodes rows of a `struct{values: list<T>, shape:
/// fixed_size_list<uint32, ndim>}` column (Python loaderx 2.8.19's
/// multi-dimensional Ragged contract) into `out`: each record is its
/// values with its shape, whose product must be the number of values.
pub(crate) fn decode_shaped(
    column: &dyn Array,
    ndim: usize,
    first_row: u64,
    out: &mut RecordBuffer,
) -> Result<(), DecodeError> {
    let s = column.as_struct_opt().ok_or_else(|| {
        format!(
            "expected struct{{values, shape}}, found {}",
            column.data_type()
        )
    })?;
    let (Some(values), Some(shapes)) = (s.column_by_name("values"), s.column_by_name("shape"))
    else {
        return Err("the struct lacks its values or shape field".into());
    };
    let shapes = shapes
        .as_fixed_size_list_opt()
        .ok_or("the shape field is not a fixed-size list")?;
    let mut flat = RecordBuffer::new(1);
    decode_numeric(values.as_ref(), &[None], first_row, &mut flat)?;
    let mut shape = vec![0usize; ndim];
    for row in 0..column.len() {
        let row_id = first_row + row as u64;
        if column.is_null(row) || shapes.is_null(row) {
            return Err(null_row(row_id));
        }
        let dims = shapes.value(row);
        let dims = dims
            .as_primitive_opt::<UInt32Type>()
            .ok_or("the shape field does not hold uint32")?;
        if dims.len() != ndim || dims.null_count() > 0 {
            return Err(DecodeError::at(
                row_id,
                format!(
                    "the shape holds {} dimensions or nulls, not {ndim}",
                    dims.len()
                ),
            ));
        }
        let mut product = 1u64;
        for (k, &d) in dims.values().iter().enumerate() {
            shape[k] = d as usize;
            product = product.saturating_mul(u64::from(d));
        }
        let (found, bytes) = flat.record(row);
        if product != found[0] as u64 {
            return Err(DecodeError::at(
                row_id,
                format!(
                    "the shape {shape:?} holds {product} values but the record has {}",
                    found[0]
                ),
            ));
        }
        out.push(&shape, bytes);
    }
    Ok(())
}

fn null_row(row: u64) -> DecodeError {
    DecodeError::at(row, super::NULL_ROW)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::builder::{FixedSizeListBuilder, Int32Builder, ListBuilder};
    use arrow_array::{Float64Array, Int64Array, ListArray, UInt64Array};

    use super::*;

    fn records(buf: &RecordBuffer) -> Vec<(Vec<usize>, Vec<u8>)> {
        buf.iter().map(|(s, b)| (s.to_vec(), b.to_vec())).collect()
    }

    #[test]
    fn scalars_keep_every_bit() {
        let mut out = RecordBuffer::new(0);
        let a = UInt64Array::from(vec![u64::MAX, 1 << 63]);
        decode_numeric(&a, &[], 0, &mut out).unwrap();
        let b = Float64Array::from(vec![-0.0, f64::NAN]);
        decode_numeric(&b, &[], 2, &mut out).unwrap();
        let r = records(&out);
        assert_eq!(r.len(), 4);
        assert_eq!(r[0], (vec![], u64::MAX.to_le_bytes().to_vec()));
        assert_eq!(r[1].1, (1u64 << 63).to_le_bytes());
        assert_eq!(r[2].1, (-0.0f64).to_le_bytes());
        assert_eq!(r[3].1, f64::NAN.to_le_bytes());
        let bools = BooleanArray::from(vec![true, false]);
        let mut out = RecordBuffer::new(0);
        decode_numeric(&bools, &[], 0, &mut out).unwrap();
        assert_eq!(out.data, [1, 0]);
    }

    #[test]
    fn sliced_arrays_read_their_own_rows() {
        let a = Int64Array::from(vec![1, 2, 3, 4]);
        let s = a.slice(1, 2);
        let mut out = RecordBuffer::new(0);
        decode_numeric(&s, &[], 0, &mut out).unwrap();
        assert_eq!(out.data[..8], 2i64.to_le_bytes());
        let l = ListArray::from_iter_primitive::<Int32Type, _, _>([
            Some(vec![Some(1)]),
            Some(vec![Some(2), Some(3)]),
            Some(vec![Some(4), Some(5), Some(6)]),
        ]);
        let s = l.slice(1, 2);
        let mut out = RecordBuffer::new(1);
        decode_numeric(&s, &[None], 0, &mut out).unwrap();
        let r = records(&out);
        assert_eq!(r[0].0, [2]);
        assert_eq!(r[1].0, [3]);
        assert_eq!(r[1].1, [4, 0, 0, 0, 5, 0, 0, 0, 6, 0, 0, 0]);
    }

    #[test]
    fn nested_lists_must_be_rectangular() {
        let mut b = ListBuilder::new(ListBuilder::new(Int32Builder::new()));
        // [[1, 2], [3, 4]], then [[5], [6, 7]].
        for rows in [vec![vec![1, 2], vec![3, 4]], vec![vec![5], vec![6, 7]]] {
            for r in rows {
                b.values().values().append_slice(&r);
                b.values().append(true);
            }
            b.append(true);
        }
        let a = b.finish();
        let mut out = RecordBuffer::new(2);
        let e = decode_numeric(&a, &[None, None], 10, &mut out).unwrap_err();
        assert_eq!(e.row, Some(11));
        assert!(e.detail.contains("not rectangular"), "{e:?}");
        assert_eq!(out.record(0).0, [2, 2]);
        // A declared Array2D shape is enforced.
        let mut out = RecordBuffer::new(2);
        let e = decode_numeric(&a.slice(0, 1), &[Some(2), Some(3)], 0, &mut out).unwrap_err();
        assert!(e.detail.contains("declares 3"), "{e:?}");
    }

    #[test]
    fn nulls_are_refused() {
        let a = Int64Array::from(vec![Some(1), None]);
        let e = decode_numeric(&a, &[], 5, &mut RecordBuffer::new(0)).unwrap_err();
        assert_eq!(e.row, Some(6));
        assert!(e.detail.contains("holds a null"), "{e:?}");
        let l = ListArray::from_iter_primitive::<Int32Type, _, _>([Some(vec![Some(1), None])]);
        assert!(decode_numeric(&l, &[None], 0, &mut RecordBuffer::new(1)).is_err());
        let l = ListArray::from_iter_primitive::<Int32Type, _, _>([None::<Vec<Option<i32>>>]);
        assert!(decode_numeric(&l, &[None], 0, &mut RecordBuffer::new(1)).is_err());
    }

    #[test]
    fn fixed_size_lists() {
        let mut b = FixedSizeListBuilder::new(Int32Builder::new(), 2);
        for r in [[1, 2], [3, 4], [5, 6]] {
            b.values().append_slice(&r);
            b.append(true);
        }
        let a = Arc::new(b.finish());
        let s = a.slice(1, 2);
        let mut out = RecordBuffer::new(1);
        decode_numeric(&s, &[Some(2)], 0, &mut out).unwrap();
        let r = records(&out);
        assert_eq!(r[0], (vec![2], vec![3, 0, 0, 0, 4, 0, 0, 0]));
        assert_eq!(r[1].1, [5, 0, 0, 0, 6, 0, 0, 0]);
    }
}
