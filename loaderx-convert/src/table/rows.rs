//! Which rows of a batch hold a null or an empty value, for
//! `drop_null_rows` / `drop_empty_rows`.
//!
//! A row holds a null when the column's value is null, or (for lists) any
//! list or element inside it is; it is empty when it is an empty string or a
//! list with no elements (`[]`, `[[], []]`). Dropped rows leave every column
//! of the split, so the stores stay aligned.

use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_schema::DataType;

/// The rows `[start, end)` of `array`'s child that row `i` covers, for list
/// arrays.
fn child_range(array: &dyn Array, i: usize) -> Option<(usize, usize)> {
    match array.data_type() {
        DataType::List(_) => {
            let o = array.as_list::<i32>().value_offsets();
            Some((o[i] as usize, o[i + 1] as usize))
        }
        DataType::LargeList(_) => {
            let o = array.as_list::<i64>().value_offsets();
            Some((o[i] as usize, o[i + 1] as usize))
        }
        DataType::FixedSizeList(_, _) => {
            let l = array.as_fixed_size_list();
            let n = l.value_length() as usize;
            let start = l.value_offset_at(i);
            Some((start, start + n))
        }
        _ => None,
    }
}

fn list_values(array: &dyn Array) -> Option<&dyn Array> {
    match array.data_type() {
        DataType::List(_) => Some(array.as_list::<i32>().values().as_ref()),
        DataType::LargeList(_) => Some(array.as_list::<i64>().values().as_ref()),
        DataType::FixedSizeList(_, _) => Some(array.as_fixed_size_list().values().as_ref()),
        _ => None,
    }
}

/// The `values` and `shape` fields of a `struct{values, shape}` column
/// (Python loaderx 2.8.19's multi-dimensional Ragged contract), in any
/// order; `None` for any other array (an `Image` or `Audio` struct's
/// `path` may well be null).
fn shaped_fields(array: &dyn Array) -> Option<(&dyn Array, &dyn Array)> {
    let s = array.as_struct_opt()?;
    if s.num_columns() != 2 {
        return None;
    }
    Some((
        s.column_by_name("values")?.as_ref(),
        s.column_by_name("shape")?.as_ref(),
    ))
}

/// True for rows `[start, end)` of `array` that hold a null anywhere
/// inside; computed only for the child rows a parent actually covers.
fn nulls_in(array: &dyn Array, start: usize, end: usize) -> Vec<bool> {
    let mut out: Vec<bool> = (start..end).map(|i| array.is_null(i)).collect();
    if let Some((values, shape)) = shaped_fields(array) {
        for child in [values, shape] {
            for (o, n) in out.iter_mut().zip(nulls_in(child, start, end)) {
                *o |= n;
            }
        }
        return out;
    }
    if let Some(values) = list_values(array) {
        let ranges: Vec<(usize, usize)> = (start..end)
            .map(|i| child_range(array, i).unwrap_or((0, 0)))
            .collect();
        let lo = ranges.iter().map(|r| r.0).min().unwrap_or(0);
        let hi = ranges.iter().map(|r| r.1).max().unwrap_or(0);
        if lo < hi {
            let child = nulls_in(values, lo, hi);
            for (k, (a, b)) in ranges.into_iter().enumerate() {
                if a < b && child[a - lo..b - lo].iter().any(|&n| n) {
                    out[k] = true;
                }
            }
        }
    }
    out
}

/// Per row of `array`: does it hold a null anywhere?
pub(crate) fn null_rows(array: &dyn Array) -> Vec<bool> {
    nulls_in(array, 0, array.len())
}

/// True for rows `[start, end)` of `array` that hold no elements.
fn empties_in(array: &dyn Array, start: usize, end: usize) -> Vec<bool> {
    if let Some((values, _)) = shaped_fields(array) {
        // A `struct{values, shape}` record is empty when its values are.
        let empty = empties_in(values, start, end);
        return (start..end)
            .zip(empty)
            .map(|(i, e)| !array.is_null(i) && e)
            .collect();
    }
    match array.data_type() {
        DataType::Utf8 => {
            let s = array.as_string::<i32>();
            (start..end)
                .map(|i| !s.is_null(i) && s.value(i).is_empty())
                .collect()
        }
        DataType::LargeUtf8 => {
            let s = array.as_string::<i64>();
            (start..end)
                .map(|i| !s.is_null(i) && s.value(i).is_empty())
                .collect()
        }
        DataType::Utf8View => {
            let s = array.as_string_view();
            (start..end)
                .map(|i| !s.is_null(i) && s.value(i).is_empty())
                .collect()
        }
        _ => {
            let Some(values) = list_values(array) else {
                return vec![false; end - start];
            };
            let ranges: Vec<(usize, usize)> = (start..end)
                .map(|i| child_range(array, i).unwrap_or((0, 0)))
                .collect();
            let lo = ranges.iter().map(|r| r.0).min().unwrap_or(0);
            let hi = ranges.iter().map(|r| r.1).max().unwrap_or(0);
            let child_is_list = list_values(values).is_some();
            let child = if child_is_list && lo < hi {
                empties_in(values, lo, hi)
            } else {
                Vec::new()
            };
            ranges
                .into_iter()
                .enumerate()
                .map(|(k, (a, b))| {
                    !array.is_null(start + k)
                        && (a == b || (child_is_list && child[a - lo..b - lo].iter().all(|&e| e)))
                })
                .collect()
        }
    }
}

/// Per row of `array`: is it an empty string or a list without elements?
pub(crate) fn empty_rows(array: &dyn Array) -> Vec<bool> {
    empties_in(array, 0, array.len())
}

/// The maximal runs `[start, end)` of rows to keep.
pub(crate) fn kept_runs(drop: &[bool]) -> Vec<(usize, usize)> {
    let mut runs = Vec::new();
    let mut start = None;
    for (i, &d) in drop.iter().enumerate() {
        match (d, start) {
            (false, None) => start = Some(i),
            (true, Some(s)) => {
                runs.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        runs.push((s, drop.len()));
    }
    runs
}

#[cfg(test)]
mod tests {
    use arrow_array::builder::{Int32Builder, ListBuilder};
    use arrow_array::types::Int32Type;
    use arrow_array::{Int64Array, ListArray, StringArray};

    use super::*;

    #[test]
    fn nulls_anywhere_in_a_row() {
        let a = Int64Array::from(vec![Some(1), None, Some(3)]);
        assert_eq!(null_rows(&a), [false, true, false]);
        let l = ListArray::from_iter_primitive::<Int32Type, _, _>([
            Some(vec![Some(1)]),
            Some(vec![Some(2), None]),
            None,
            Some(vec![]),
        ]);
        assert_eq!(null_rows(&l), [false, true, true, false]);
        // Sliced arrays answer for their own rows.
        assert_eq!(null_rows(&l.slice(1, 3)), [true, true, false]);
    }

    #[test]
    fn empty_strings_and_lists() {
        let s = StringArray::from(vec![Some("a"), Some(""), None]);
        assert_eq!(empty_rows(&s), [false, true, false]);
        let mut b = ListBuilder::new(ListBuilder::new(Int32Builder::new()));
        // [[1]], [], [[], []], [[2], []]
        b.values().values().append_value(1);
        b.values().append(true);
        b.append(true);
        b.append(true);
        b.values().append(true);
        b.values().append(true);
        b.append(true);
        b.values().values().append_value(2);
        b.values().append(true);
        b.values().append(true);
        b.append(true);
        let l = b.finish();
        assert_eq!(empty_rows(&l), [false, true, true, false]);
        assert_eq!(empty_rows(&l.slice(2, 2)), [true, false]);
    }

    #[test]
    fn runs_of_kept_rows() {
        assert_eq!(
            kept_runs(&[false, false, true, false, true, true]),
            [(0, 2), (3, 4)]
        );
        assert_eq!(kept_runs(&[true]), []);
        assert_eq!(kept_runs(&[false]), [(0, 1)]);
    }
}
