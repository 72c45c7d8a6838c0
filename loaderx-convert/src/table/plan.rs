//! Column-type mapping: how each parquet column becomes a store.
//!
//! The decision uses the column's Arrow type and, when the file carries one,
//! the Hugging Face `features` description from the `huggingface` key of the
//! schema metadata (`{"info": {"features": {column: feature}}}`):
//!
//! | source                                          | store                        |
//! |-------------------------------------------------|------------------------------|
//! | `Value` int / uint / float / bool, `ClassLabel` | Dense scalar, same dtype      |
//! | fixed-size list, `List(length=n)`, `ArrayND`     | Dense `[n, ...]`              |
//! | variable-length list (`List`, `Sequence`)       | Ragged, one rank per level    |
//! | `ArrayND` with a `None` first dimension         | Ragged of rank N              |
//! | `Image` (struct `{bytes, path}`)                | decided by [`super::images`]  |
//! | `Audio` (struct `{bytes, path}`)                | Ragged `f32` + Dense `u32` rate, [`super::audio`] |
//! | `Value("string")` (with a text encoding chosen) | Ragged `u8` bytes / `u32` ids |
//! | lists of strings, binary, structs, dates, ...   | error naming the column       |

use arrow_schema::{DataType, Field};
use serde_json::Value;

use loaderx_core::DType;

/// How one source column is decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ColumnKind {
    /// Numbers or booleans under `dims.len()` list levels; each level has a
    /// fixed length (`Some`) or a per-record one (`None`).
    Numeric {
        /// Element type, as stored in the file.
        dtype: DType,
        /// One entry per list level, outermost first.
        dims: Vec<Option<usize>>,
    },
    /// An encoded PNG/JPEG image in a `{bytes, path}` struct.
    Image {
        /// The mode the `Image` feature asks for, if any (`L`, `RGB`, ...).
        mode: Option<String>,
    },
    /// An encoded audio file (WAV, FLAC, MP3, OGG/Vorbis) in a
    /// `{bytes, path}` struct.
    Audio,
    /// A string per row.
    Text,
    /// Python loaderx 2.8.19's multi-dimensional Ragged contract: a
    /// `struct{values: list<T>, shape: fixed_size_list<uint32, ndim>}`,
    /// each record's values in C order and its shape.
    Shaped {
        /// Element type of the values.
        dtype: DType,
        /// Rank of every record.
        ndim: usize,
    },
}

impl ColumnKind {
    /// Dense item shape when every list level has a fixed length.
    pub(crate) fn fixed_shape(&self) -> Option<Vec<usize>> {
        match self {
            ColumnKind::Numeric { dims, .. } => dims.iter().copied().collect(),
            ColumnKind::Image { .. }
            | ColumnKind::Audio
            | ColumnKind::Text
            | ColumnKind::Shaped { .. } => None,
        }
    }
}

/// One column of a split: its name, position and decoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ColumnPlan {
    /// The column name in the source.
    pub(crate) name: String,
    /// The name of its store: `name`, or [`store_names`]' mapping of it.
    pub(crate) store: String,
    /// Root column index in the Arrow schema.
    pub(crate) index: usize,
    /// How it is decoded.
    pub(crate) kind: ColumnKind,
    /// The class names of a numeric `ClassLabel` column (or list of them),
    /// in label order, from its feature ([`class_label_names`]).
    pub(crate) classes: Option<Vec<String>>,
}

/// True when `name` is a stream name every store and dataset accepts
/// ([`loaderx_core::Dataset::check_stream_name`]: ASCII letters and digits,
/// `_`, `-` and `.`, not empty, not starting with `.`).
pub(crate) fn is_stream_name(name: &str) -> bool {
    loaderx_core::Dataset::check_stream_name(name).is_ok()
}

/// The store name of each of `columns` (source names, in output order),
/// each one a stream name ([`is_stream_name`]): a name that is one already
/// is kept; any other has every other character (a space, a non-ASCII
/// letter, a `/`) and a leading `.` replaced by `_` (an empty name becomes
/// `_`), then, when that is taken by an earlier store or a kept name,
/// `_2`, `_3`, ... appended (the first free one). Deterministic: the same
/// columns always get the same names.
pub(crate) fn store_names(columns: &[String]) -> Vec<String> {
    let mut taken: Vec<String> = columns
        .iter()
        .filter(|n| is_stream_name(n))
        .cloned()
        .collect();
    columns
        .iter()
        .map(|name| {
            if is_stream_name(name) {
                return name.clone();
            }
            let mut base: String = name
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            if base.is_empty() {
                base.push('_');
            }
            if base.starts_with('.') {
                base.replace_range(..1, "_");
            }
            let mut candidate = base.clone();
            let mut k = 2u64;
            while taken.contains(&candidate) {
                candidate = format!("{base}_{k}");
                k += 1;
            }
            taken.push(candidate.clone());
            candidate
        })
        .collect()
}

/// The `features` object from a schema's `huggingface` metadata value, if
/// present and well-formed JSON.
pub(crate) fn hf_features(metadata_json: Option<&str>) -> Result<Option<Value>, String> {
    let Some(text) = metadata_json else {
        return Ok(None);
    };
    let value: Value = serde_json::from_str(text)
        .map_err(|e| format!("the `huggingface` schema metadata is not valid JSON: {e}"))?;
    Ok(value
        .get("info")
        .and_then(|i| i.get("features"))
        .or_else(|| value.get("features"))
        .cloned())
}

fn feature_type(feature: &Value) -> Option<&str> {
    feature.get("_type").and_then(Value::as_str)
}

/// Maps an Arrow leaf type to a store element type.
pub(crate) fn leaf_dtype(dt: &DataType) -> Result<DType, String> {
    Ok(match dt {
        DataType::Boolean => DType::Bool,
        DataType::Int8 => DType::I8,
        DataType::Int16 => DType::I16,
        DataType::Int32 => DType::I32,
        DataType::Int64 => DType::I64,
        DataType::UInt8 => DType::U8,
        DataType::UInt16 => DType::U16,
        DataType::UInt32 => DType::U32,
        DataType::UInt64 => DType::U64,
        DataType::Float16 => DType::F16,
        DataType::Float32 => DType::F32,
        DataType::Float64 => DType::F64,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            return Err("lists of strings are not supported".into());
        }
        DataType::Null => return Err("the column holds only nulls".into()),
        DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_) => {
            return Err("raw binary values (not an Image feature) are not supported".into());
        }
        DataType::Struct(_) => {
            return Err(
                "nested structs (dicts) are not supported; convert each field as its own column"
                    .into(),
            );
        }
        other => return Err(format!("Arrow type {other} is not supported")),
    })
}

fn is_file_struct(dt: &DataType) -> bool {
    match dt {
        DataType::Struct(fields) => {
            fields.iter().any(|f| {
                f.name() == "bytes"
                    && matches!(
                        f.data_type(),
                        DataType::Binary | DataType::LargeBinary | DataType::BinaryView
                    )
            }) && fields.iter().any(|f| f.name() == "path")
                && fields.len() == 2
        }
        _ => false,
    }
}

fn list_child(dt: &DataType) -> Option<(&Field, Option<usize>)> {
    match dt {
        DataType::List(f) | DataType::LargeList(f) => Some((f, None)),
        DataType::FixedSizeList(f, n) => Some((f, usize::try_from(*n).ok())),
        _ => None,
    }
}

/// The element feature and declared length of a list-like feature.
fn list_feature(feature: &Value) -> Option<(Option<&Value>, Option<usize>)> {
    if let Some(items) = feature.as_array() {
        // The old shorthand `[feature]` for a variable-length list.
        return Some((items.first(), None));
    }
    match feature_type(feature)? {
        "Sequence" | "List" | "LargeList" => {
            let length = feature
                .get("length")
                .and_then(Value::as_i64)
                .and_then(|n| usize::try_from(n).ok());
            Some((feature.get("feature"), length))
        }
        _ => None,
    }
}

/// The class names of a `ClassLabel` feature, or of a list of them (a
/// `Sequence` of `ClassLabel`, a multi-label column): its `names`, in label
/// order. `None` for any other feature, or one without a `names` array of
/// strings (a `ClassLabel` given only `num_classes` has no names to keep).
pub(crate) fn class_label_names(feature: &Value) -> Option<Vec<String>> {
    if feature_type(feature) == Some("ClassLabel") {
        return feature
            .get("names")?
            .as_array()?
            .iter()
            .map(|n| n.as_str().map(str::to_owned))
            .collect();
    }
    let (inner, _) = list_feature(feature)?;
    class_label_names(inner?)
}

/// The `(dtype, ndim)` of a `struct{values: list<T>, shape:
/// fixed_size_list<uint32, ndim>}` column (Python loaderx 2.8.19's
/// multi-dimensional Ragged contract); `None` for any other type, an error
/// for a struct of those two names whose types do not fit.
fn shaped_struct(dt: &DataType) -> Result<Option<(DType, usize)>, String> {
    let DataType::Struct(fields) = dt else {
        return Ok(None);
    };
    let mut names: Vec<&str> = fields.iter().map(|f| f.name().as_str()).collect();
    names.sort_unstable();
    if names != ["shape", "values"] {
        return Ok(None);
    }
    let field = |name: &str| fields.iter().find(|f| f.name() == name);
    let (Some(values), Some(shape)) = (field("values"), field("shape")) else {
        return Ok(None);
    };
    let bad = || {
        format!(
            "a struct{{values, shape}} column must hold values: list<number> and shape: \
             fixed_size_list<uint32, ndim>, not {dt}"
        )
    };
    let dtype = match values.data_type() {
        DataType::List(f) | DataType::LargeList(f) => {
            leaf_dtype(f.data_type()).map_err(|_| bad())?
        }
        _ => return Err(bad()),
    };
    let ndim = match shape.data_type() {
        DataType::FixedSizeList(f, n) if *f.data_type() == DataType::UInt32 && *n > 0 => {
            usize::try_from(*n).map_err(|_| bad())?
        }
        _ => return Err(bad()),
    };
    Ok(Some((dtype, ndim)))
}

/// Decides how column `field` is decoded, given its HF feature (if any).
pub(crate) fn plan_column(field: &Field, feature: Option<&Value>) -> Result<ColumnKind, String> {
    let dt = field.data_type();
    if let Some((dtype, ndim)) = shaped_struct(dt)? {
        return Ok(ColumnKind::Shaped { dtype, ndim });
    }
    if let Some(f) = feature {
        match feature_type(f) {
            Some("Image") => {
                if !is_file_struct(dt) {
                    return Err(format!(
                        "Image feature stored as {dt}, expected struct<bytes: binary, path: string>"
                    ));
                }
                let mode = f.get("mode").and_then(Value::as_str).map(str::to_owned);
                return Ok(ColumnKind::Image { mode });
            }
            Some("Audio") => {
                if !is_file_struct(dt) {
                    return Err(format!(
                        "Audio feature stored as {dt}, expected struct<bytes: binary, path: string>"
                    ));
                }
                return Ok(ColumnKind::Audio);
            }
            Some(t @ ("Array2D" | "Array3D" | "Array4D" | "Array5D")) => {
                return plan_array(t, f, dt);
            }
            Some(
                t @ ("Video" | "Pdf" | "Nifti" | "Translation" | "TranslationVariableLanguages"),
            ) => {
                return Err(format!("the {t} feature is not supported"));
            }
            Some("Value" | "ClassLabel") | None => {}
            Some(_) => {}
        }
        if f.is_object() && feature_type(f).is_none() {
            return Err(
                "nested structs (dicts) are not supported; convert each field as its own column"
                    .into(),
            );
        }
    } else if is_file_struct(dt) {
        return Ok(ColumnKind::Image { mode: None });
    }
    if matches!(
        dt,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    ) {
        return Ok(ColumnKind::Text);
    }
    let mut dims = Vec::new();
    let mut current_dt = dt;
    let mut current_feature = feature;
    while let Some((child, arrow_len)) = list_child(current_dt) {
        let (inner, declared) = match current_feature.and_then(list_feature) {
            Some((inner, declared)) => (inner, declared),
            None => (None, None),
        };
        if let (Some(a), Some(d)) = (arrow_len, declared)
            && a != d
        {
            return Err(format!(
                "the feature declares length {d} but the file stores lists of {a}"
            ));
        }
        dims.push(arrow_len.or(declared));
        if let Some(inner) = inner {
            match feature_type(inner) {
                Some("Image") => return Err("lists of images are not supported".into()),
                Some("Audio") => return Err("lists of audio files are not supported".into()),
                Some(t @ ("Array2D" | "Array3D" | "Array4D" | "Array5D")) => {
                    return Err(format!("lists of {t} are not supported"));
                }
                _ => {}
            }
        }
        current_feature = inner;
        current_dt = child.data_type();
    }
    if is_file_struct(current_dt) {
        return Err("lists of images are not supported".into());
    }
    let dtype = leaf_dtype(current_dt)?;
    Ok(ColumnKind::Numeric { dtype, dims })
}

fn plan_array(kind: &str, feature: &Value, dt: &DataType) -> Result<ColumnKind, String> {
    let shape = feature
        .get("shape")
        .and_then(Value::as_array)
        .ok_or_else(|| format!("the {kind} feature has no shape"))?;
    let mut dims = Vec::with_capacity(shape.len());
    for (k, d) in shape.iter().enumerate() {
        match d.as_u64() {
            Some(n) => dims.push(Some(
                usize::try_from(n).map_err(|_| format!("{kind} dimension {n} is too large"))?,
            )),
            None if d.is_null() && k == 0 => dims.push(None),
            None => return Err(format!("{kind} shape {shape:?} is not understood")),
        }
    }
    let mut current = dt;
    for (k, want) in dims.iter().enumerate() {
        let Some((child, arrow_len)) = list_child(current) else {
            return Err(format!(
                "{kind} of shape {shape:?} is stored with only {k} list levels ({dt})"
            ));
        };
        if let (Some(a), Some(w)) = (arrow_len, want)
            && a != *w
        {
            return Err(format!(
                "{kind} declares dimension {w} but the file stores lists of {a}"
            ));
        }
        current = child.data_type();
    }
    if list_child(current).is_some() {
        return Err(format!(
            "{kind} of shape {shape:?} is stored with more list levels ({dt})"
        ));
    }
    let dtype = leaf_dtype(current)?;
    Ok(ColumnKind::Numeric { dtype, dims })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;

    fn field(dt: DataType) -> Field {
        Field::new("c", dt, true)
    }

    fn list(dt: DataType) -> DataType {
        DataType::List(Arc::new(Field::new("element", dt, true)))
    }

    fn fixed(dt: DataType, n: i32) -> DataType {
        DataType::FixedSizeList(Arc::new(Field::new("element", dt, true)), n)
    }

    fn image() -> DataType {
        DataType::Struct(
            vec![
                Field::new("bytes", DataType::Binary, true),
                Field::new("path", DataType::Utf8, true),
            ]
            .into(),
        )
    }

    fn numeric(dtype: DType, dims: &[Option<usize>]) -> ColumnKind {
        ColumnKind::Numeric {
            dtype,
            dims: dims.to_vec(),
        }
    }

    #[test]
    fn scalars_keep_their_dtype() {
        for (dt, want) in [
            (DataType::Boolean, DType::Bool),
            (DataType::Int8, DType::I8),
            (DataType::Int64, DType::I64),
            (DataType::UInt64, DType::U64),
            (DataType::Float16, DType::F16),
            (DataType::Float64, DType::F64),
        ] {
            assert_eq!(plan_column(&field(dt), None).unwrap(), numeric(want, &[]));
        }
        let label = json!({"_type": "ClassLabel", "names": ["a", "b"]});
        assert_eq!(
            plan_column(&field(DataType::Int64), Some(&label)).unwrap(),
            numeric(DType::I64, &[])
        );
    }

    #[test]
    fn lists_are_dense_when_fixed_and_ragged_otherwise() {
        // Without metadata the Arrow type decides.
        assert_eq!(
            plan_column(&field(list(DataType::Int32)), None).unwrap(),
            numeric(DType::I32, &[None])
        );
        let k = plan_column(&field(fixed(DataType::Int16, 3)), None).unwrap();
        assert_eq!(k, numeric(DType::I16, &[Some(3)]));
        assert_eq!(k.fixed_shape(), Some(vec![3]));
        // HF List(length=n) stored as a variable list: dense.
        let seq =
            json!({"_type": "List", "feature": {"_type": "Value", "dtype": "int16"}, "length": 3});
        assert_eq!(
            plan_column(&field(list(DataType::Int16)), Some(&seq)).unwrap(),
            numeric(DType::I16, &[Some(3)])
        );
        // Old Sequence with length -1: ragged.
        let seq = json!({"_type": "Sequence", "feature": {"_type": "Value", "dtype": "int32"}, "length": -1});
        let k = plan_column(&field(list(DataType::Int32)), Some(&seq)).unwrap();
        assert_eq!(k, numeric(DType::I32, &[None]));
        assert_eq!(k.fixed_shape(), None);
        // A mismatch between the feature and the file is an error.
        let seq =
            json!({"_type": "List", "feature": {"_type": "Value", "dtype": "int16"}, "length": 4});
        assert!(
            plan_column(&field(fixed(DataType::Int16, 3)), Some(&seq))
                .unwrap_err()
                .contains("length 4")
        );
    }

    #[test]
    fn arrays_follow_their_declared_shape() {
        let a2 = json!({"_type": "Array2D", "shape": [2, 3], "dtype": "float32"});
        let dt = list(list(DataType::Float32));
        assert_eq!(
            plan_column(&field(dt.clone()), Some(&a2)).unwrap(),
            numeric(DType::F32, &[Some(2), Some(3)])
        );
        let a3 = json!({"_type": "Array3D", "shape": [null, 2, 2], "dtype": "int64"});
        let dt3 = list(list(list(DataType::Int64)));
        assert_eq!(
            plan_column(&field(dt3), Some(&a3)).unwrap(),
            numeric(DType::I64, &[None, Some(2), Some(2)])
        );
        // Wrong nesting depth.
        assert!(plan_column(&field(list(DataType::Float32)), Some(&a2)).is_err());
        let bad = json!({"_type": "Array3D", "shape": [2, 2, 2], "dtype": "int64"});
        assert!(plan_column(&field(dt), Some(&bad)).is_err());
    }

    #[test]
    fn images_by_feature_or_by_struct() {
        let img = json!({"_type": "Image"});
        assert_eq!(
            plan_column(&field(image()), Some(&img)).unwrap(),
            ColumnKind::Image { mode: None }
        );
        assert_eq!(
            plan_column(&field(image()), None).unwrap(),
            ColumnKind::Image { mode: None }
        );
        let rgb = json!({"_type": "Image", "mode": "RGB"});
        assert_eq!(
            plan_column(&field(image()), Some(&rgb)).unwrap(),
            ColumnKind::Image {
                mode: Some("RGB".into())
            }
        );
        assert!(plan_column(&field(DataType::Binary), Some(&img)).is_err());
        assert!(
            plan_column(&field(list(image())), None)
                .unwrap_err()
                .contains("lists of images")
        );
    }

    #[test]
    fn lossy_or_unknown_columns_are_refused() {
        assert_eq!(
            plan_column(&field(DataType::Utf8), None).unwrap(),
            ColumnKind::Text
        );
        assert_eq!(
            plan_column(&field(DataType::LargeUtf8), None).unwrap(),
            ColumnKind::Text
        );
        for (dt, why) in [
            (list(DataType::Utf8), "lists of strings"),
            (DataType::Null, "only nulls"),
            (DataType::Binary, "binary"),
            (DataType::Date32, "not supported"),
            (
                DataType::Struct(vec![Field::new("a", DataType::Int32, true)].into()),
                "structs",
            ),
        ] {
            let e = plan_column(&field(dt.clone()), None).unwrap_err();
            assert!(e.contains(why), "{dt}: {e}");
        }
        let audio = json!({"_type": "Audio", "sampling_rate": 16000});
        assert_eq!(
            plan_column(&field(image()), Some(&audio)).unwrap(),
            ColumnKind::Audio
        );
        assert!(
            plan_column(&field(DataType::Binary), Some(&audio))
                .unwrap_err()
                .contains("Audio feature stored as")
        );
        let video = json!({"_type": "Video"});
        assert!(
            plan_column(&field(image()), Some(&video))
                .unwrap_err()
                .contains("Video")
        );
        let dict = json!({"a": {"_type": "Value", "dtype": "int32"}});
        assert!(plan_column(&field(DataType::Int32), Some(&dict)).is_err());
    }

    #[test]
    fn store_names_are_stream_names_and_deterministic() {
        let names = |c: &[&str]| store_names(&c.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(
            names(&["my col", "é", "label", "a.b-c_1"]),
            ["my_col", "_", "label", "a.b-c_1"]
        );
        // A mapped name never takes a kept one, nor an earlier mapped one.
        assert_eq!(
            names(&["my col", "my_col", "my/col", "", ".x", "_x"]),
            ["my_col_2", "my_col", "my_col_3", "_", "_x_2", "_x"]
        );
        assert_eq!(names(&["é", "è", "_"]), ["__2", "__3", "_"]);
        for n in names(&["a b", "ü", "..", ".", "x\0y", "日本"]) {
            assert!(is_stream_name(&n), "{n:?}");
        }
        assert_eq!(names(&["a b", "a_b"]), names(&["a b", "a_b"]));
    }

    #[test]
    fn class_names_come_from_class_labels_and_lists_of_them() {
        let names = |v: Value| class_label_names(&v);
        let want = Some(vec!["a".to_owned(), "b".to_owned()]);
        assert_eq!(
            names(json!({"_type": "ClassLabel", "names": ["a", "b"]})),
            want
        );
        assert_eq!(
            names(
                json!({"_type": "Sequence", "feature": {"_type": "ClassLabel", "names": ["a", "b"]}})
            ),
            want
        );
        assert_eq!(
            names(json!([{"_type": "ClassLabel", "names": ["a", "b"]}])),
            want
        );
        assert_eq!(
            names(json!({"_type": "ClassLabel", "num_classes": 3})),
            None
        );
        assert_eq!(names(json!({"_type": "ClassLabel", "names": [1]})), None);
        assert_eq!(names(json!({"_type": "Value", "dtype": "int64"})), None);
    }

    #[test]
    fn features_come_from_the_huggingface_metadata() {
        let meta = r#"{"info": {"features": {"x": {"_type": "Value", "dtype": "int8"}}}}"#;
        let f = hf_features(Some(meta)).unwrap().unwrap();
        assert_eq!(f["x"]["dtype"], "int8");
        assert_eq!(hf_features(None).unwrap(), None);
        assert!(hf_features(Some("{")).is_err());
    }
}
