//! The record schema stored in the static page, in each generation's
//! encoding.
//!
//! The MsgPack generations (2.4.6, 2.8.12) write
//! `{"dtype": <spelling>, "ndim": <int>, "item_shape": [<int>...]}` for Dense
//! stores and `{"dtype", "ndim"}` for Ragged ones; the JSON generations
//! (2.8.18, 2.8.19) write `{"dtype": <name>, "item_shape": [...]}` for Dense
//! and `{"dtype": <name>, "ndim": <int>}` for Ragged stores, as Python's
//! `json.dumps` spaces them. Reading accepts any key order, any MsgPack
//! integer width and JSON whitespace; missing, extra, duplicate or ill-typed
//! keys, a byte-order mark and trailing bytes are rejected.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{MAX_NDIM, MAX_SCHEMA_LEN};
use crate::dtype::DType;
use crate::error::{Error, StoreKind};
use crate::{Generation, MAX_RECORD_LEN};

/// A store's record schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Schema {
    /// Every record has `item_shape`.
    Dense {
        /// Element type.
        dtype: DType,
        /// Shape of every record (empty for scalar records).
        item_shape: Vec<usize>,
    },
    /// Every record has rank `ndim` and its own dimension lengths.
    Ragged {
        /// Element type.
        dtype: DType,
        /// Rank of every record, at least 1.
        ndim: usize,
    },
}

/// The MsgPack schema.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    dtype: String,
    ndim: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    item_shape: Option<Vec<u64>>,
}

/// The JSON schema: exactly `item_shape` (Dense) or `ndim` (Ragged).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonWire {
    dtype: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    item_shape: Option<Vec<u64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ndim: Option<u64>,
}

impl Schema {
    /// Validated Dense schema.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for a rank of
    /// 64 or more, or a record of 0 bytes or over 2 GiB.
    pub fn dense(dtype: DType, item_shape: &[usize]) -> Result<Schema, Error> {
        let schema = Schema::Dense {
            dtype,
            item_shape: item_shape.to_vec(),
        };
        schema.validate()?;
        Ok(schema)
    }

    /// Validated Ragged schema.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) unless `ndim`
    /// is 1 to 64.
    pub fn ragged(dtype: DType, ndim: usize) -> Result<Schema, Error> {
        let schema = Schema::Ragged { dtype, ndim };
        schema.validate()?;
        Ok(schema)
    }

    /// The record contract.
    pub fn kind(&self) -> StoreKind {
        match self {
            Schema::Dense { .. } => StoreKind::Dense,
            Schema::Ragged { .. } => StoreKind::Ragged,
        }
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            Schema::Dense { dtype, .. } | Schema::Ragged { dtype, .. } => *dtype,
        }
    }

    /// The record rank.
    pub fn ndim(&self) -> usize {
        match self {
            Schema::Dense { item_shape, .. } => item_shape.len(),
            Schema::Ragged { ndim, .. } => *ndim,
        }
    }

    /// Bytes of one Dense record (`None` for Ragged).
    pub fn record_bytes(&self) -> Option<usize> {
        match self {
            Schema::Dense { dtype, item_shape } => Some(dense_width(*dtype, item_shape)?),
            Schema::Ragged { .. } => None,
        }
    }

    fn validate(&self) -> Result<(), Error> {
        match self {
            Schema::Dense { dtype, item_shape } => {
                if item_shape.len() >= MAX_NDIM {
                    return Err(Error::invalid(format!(
                        "item_shape rank {} must be below {MAX_NDIM}",
                        item_shape.len()
                    )));
                }
                match dense_width(*dtype, item_shape) {
                    Some(w) if w > 0 && w as u64 <= MAX_RECORD_LEN => Ok(()),
                    _ => Err(Error::invalid(format!(
                        "dense record of shape {item_shape:?} and type {dtype} must be 1 byte to 2 GiB"
                    ))),
                }
            }
            Schema::Ragged { ndim, .. } => {
                if (1..=MAX_NDIM).contains(ndim) {
                    Ok(())
                } else {
                    Err(Error::invalid(format!(
                        "ragged ndim {ndim} must be between 1 and {MAX_NDIM}"
                    )))
                }
            }
        }
    }

    /// The schema's bytes in `generation`'s encoding, exactly as the Python
    /// release that names it encodes the same schema.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) when
    /// the generation cannot spell the element type, the encoding fails or
    /// it is longer than the 2040 bytes the static page holds.
    pub fn encode(&self, generation: Generation) -> Result<Vec<u8>, Error> {
        let dtype = generation
            .dtype_spelling(self.dtype())
            .ok_or_else(|| {
                Error::invalid(format!(
                    "the {generation} generation cannot express {}",
                    self.dtype().numpy_name()
                ))
            })?
            .to_owned();
        let item_shape = match self {
            Schema::Dense { item_shape, .. } => {
                Some(item_shape.iter().map(|&d| d as u64).collect())
            }
            Schema::Ragged { .. } => None,
        };
        let bytes = if generation.json_schema() {
            let wire = JsonWire {
                dtype,
                ndim: item_shape.is_none().then_some(self.ndim() as u64),
                item_shape,
            };
            python_json(&wire)?
        } else {
            let wire = Wire {
                dtype,
                ndim: self.ndim() as u64,
                item_shape,
            };
            rmp_serde::to_vec_named(&wire)
                .map_err(|e| Error::invalid(format!("schema encoding failed: {e}")))?
        };
        if bytes.is_empty() || bytes.len() > MAX_SCHEMA_LEN {
            return Err(Error::invalid(format!(
                "encoded schema is {} bytes; at most {MAX_SCHEMA_LEN} fit",
                bytes.len()
            )));
        }
        Ok(bytes)
    }

    /// Decodes and validates schema bytes read from `meta_path` (the
    /// store's `meta.zr`, which errors name).
    ///
    /// # Errors
    ///
    /// As [`decode_generation`](Self::decode_generation).
    pub fn decode(bytes: &[u8], meta_path: impl AsRef<Path>) -> Result<Schema, Error> {
        Schema::decode_generation(bytes, meta_path).map(|(schema, _)| schema)
    }

    /// Decodes and validates schema bytes read from `meta_path`, with the
    /// generation the encoding shows: [`Generation::V2_4_6`] for MsgPack with
    /// NumPy `dtype.str` spellings, [`Generation::V2_8_12`] for MsgPack with
    /// NumPy names, [`Generation::V2_8_19`] for JSON (a Ragged store's dims
    /// tell 2.8.18 from 2.8.19; the schema cannot).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Corrupt`](crate::ErrorKind::Corrupt) naming `meta_path`,
    /// its detail naming the problem, for anything that is not one MsgPack map
    /// or JSON object of a schema some generation writes (missing, extra,
    /// duplicate or ill-typed keys, trailing bytes, an unsupported dtype, a
    /// rank or size out of range).
    pub fn decode_generation(
        bytes: &[u8],
        meta_path: impl AsRef<Path>,
    ) -> Result<(Schema, Generation), Error> {
        Schema::decode_detail(bytes).map_err(|detail| Error::corrupt(meta_path, detail))
    }

    /// [`Schema::decode_generation`], its error a bare detail.
    fn decode_detail(bytes: &[u8]) -> Result<(Schema, Generation), String> {
        let first = bytes.iter().find(|b| !b" \t\r\n".contains(b));
        if first == Some(&b'{') {
            return Schema::decode_json(bytes);
        }
        let mut cursor = std::io::Cursor::new(bytes);
        let wire =
            Wire::deserialize(&mut rmp_serde::Deserializer::new(&mut cursor)).map_err(|e| {
                format!(
                    "bad schema: {e} (not a schema of any loaderx generation this crate reads: \
                 MsgPack of 2.4.6 to 2.8.12, JSON of 2.8.18 and 2.8.19)"
                )
            })?;
        if cursor.position() != bytes.len() as u64 {
            return Err("bad schema: trailing bytes after the MsgPack object".into());
        }
        let (dtype, generation) = match DType::from_numpy_str(&wire.dtype) {
            Ok(d) => (d, Generation::V2_4_6),
            Err(_) => (
                DType::from_numpy_name(&wire.dtype).map_err(|e| format!("bad schema: {e}"))?,
                Generation::V2_8_12,
            ),
        };
        let ndim = usize::try_from(wire.ndim).map_err(|_| "bad schema: ndim too large")?;
        let schema = match wire.item_shape {
            Some(shape) => {
                let item_shape = dims(shape)?;
                if item_shape.len() != ndim {
                    return Err(format!(
                        "bad schema: ndim {ndim} does not match item_shape {item_shape:?}"
                    ));
                }
                Schema::Dense { dtype, item_shape }
            }
            None => Schema::Ragged { dtype, ndim },
        };
        schema.validate().map_err(|e| format!("bad schema: {e}"))?;
        Ok((schema, generation))
    }

    /// The JSON schema of the 2.8.18 and 2.8.19 generations.
    fn decode_json(bytes: &[u8]) -> Result<(Schema, Generation), String> {
        let wire: JsonWire =
            serde_json::from_slice(bytes).map_err(|e| format!("bad JSON schema: {e}"))?;
        // 2.8.19 reads legacy spellings in a JSON schema too.
        let dtype = DType::from_numpy_name(&wire.dtype)
            .or_else(|_| DType::from_numpy_str(&wire.dtype))
            .map_err(|e| format!("bad schema: {e}"))?;
        let schema = match (wire.item_shape, wire.ndim) {
            (Some(shape), None) => Schema::Dense {
                dtype,
                item_shape: dims(shape)?,
            },
            (None, Some(ndim)) => Schema::Ragged {
                dtype,
                ndim: usize::try_from(ndim).map_err(|_| "bad schema: ndim too large")?,
            },
            _ => {
                return Err(
                    "bad JSON schema: exactly one of item_shape (Dense) and ndim (Ragged) \
                     must be present"
                        .into(),
                );
            }
        };
        schema.validate().map_err(|e| format!("bad schema: {e}"))?;
        Ok((schema, Generation::V2_8_19))
    }
}

/// Dimension lengths from the wire.
fn dims(shape: Vec<u64>) -> Result<Vec<usize>, String> {
    shape
        .into_iter()
        .map(usize::try_from)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| "bad schema: item_shape dimension too large".into())
}

/// JSON as Python's `json.dumps` writes it by default: `", "` between items
/// and `": "` after keys, keys in declaration order, ASCII only.
fn python_json(value: &impl Serialize) -> Result<Vec<u8>, Error> {
    struct Python;
    impl serde_json::ser::Formatter for Python {
        fn begin_array_value<W: ?Sized + std::io::Write>(
            &mut self,
            writer: &mut W,
            first: bool,
        ) -> std::io::Result<()> {
            if first {
                Ok(())
            } else {
                writer.write_all(b", ")
            }
        }
        fn begin_object_key<W: ?Sized + std::io::Write>(
            &mut self,
            writer: &mut W,
            first: bool,
        ) -> std::io::Result<()> {
            if first {
                Ok(())
            } else {
                writer.write_all(b", ")
            }
        }
        fn begin_object_value<W: ?Sized + std::io::Write>(
            &mut self,
            writer: &mut W,
        ) -> std::io::Result<()> {
            writer.write_all(b": ")
        }
    }
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, Python);
    value
        .serialize(&mut ser)
        .map_err(|e| Error::invalid(format!("schema encoding failed: {e}")))?;
    Ok(out)
}

fn dense_width(dtype: DType, item_shape: &[usize]) -> Option<usize> {
    item_shape
        .iter()
        .try_fold(dtype.size(), |acc, &d| acc.checked_mul(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_like_python() {
        // Bytes taken from a store written by Python loaderx 2.4.6.
        // Bytes taken from stores written by Python loaderx 2.4.6, 2.8.12,
        // 2.8.18 and 2.8.19.
        let dense = Schema::dense(DType::U8, &[2, 3]).unwrap();
        let ragged = Schema::ragged(DType::I32, 2).unwrap();
        let cases: [(Generation, &Schema, &[u8]); 6] = [
            (
                Generation::V2_4_6,
                &dense,
                b"\x83\xa5dtype\xa3|u1\xa4ndim\x02\xaaitem_shape\x92\x02\x03",
            ),
            (
                Generation::V2_4_6,
                &ragged,
                b"\x82\xa5dtype\xa3<i4\xa4ndim\x02",
            ),
            (
                Generation::V2_8_12,
                &dense,
                b"\x83\xa5dtype\xa5uint8\xa4ndim\x02\xaaitem_shape\x92\x02\x03",
            ),
            (
                Generation::V2_8_12,
                &ragged,
                b"\x82\xa5dtype\xa5int32\xa4ndim\x02",
            ),
            (
                Generation::V2_8_19,
                &dense,
                br#"{"dtype": "uint8", "item_shape": [2, 3]}"#,
            ),
            (
                Generation::V2_8_19,
                &ragged,
                br#"{"dtype": "int32", "ndim": 2}"#,
            ),
        ];
        for (generation, schema, bytes) in cases {
            assert_eq!(schema.encode(generation).unwrap(), bytes, "{generation}");
            assert_eq!(
                Schema::decode_generation(bytes, "m").unwrap(),
                (schema.clone(), generation)
            );
        }
        let scalar = Schema::dense(DType::BF16, &[]).unwrap();
        assert_eq!(
            scalar.encode(Generation::V2_8_19).unwrap(),
            br#"{"dtype": "bfloat16", "item_shape": []}"#
        );
        assert!(scalar.encode(Generation::V2_4_6).is_err());
    }

    #[test]
    fn accepts_reordered_keys_and_wide_ints() {
        // {"ndim": uint64 2, "dtype": "<i4"} with ndim as a 9-byte integer.
        let bytes = b"\x82\xa4ndim\xcf\x00\x00\x00\x00\x00\x00\x00\x02\xa5dtype\xa3<i4";
        assert_eq!(
            Schema::decode(bytes, "m").unwrap(),
            Schema::Ragged {
                dtype: DType::I32,
                ndim: 2
            }
        );
    }

    #[test]
    fn rejects_bad_schemas() {
        let extra = b"\x83\xa5dtype\xa3<i4\xa4ndim\x01\xa1x\x01";
        let missing = b"\x81\xa5dtype\xa3<i4";
        let mismatch = b"\x83\xa5dtype\xa3|u1\xa4ndim\x01\xaaitem_shape\x92\x02\x03";
        let zero_dim = b"\x83\xa5dtype\xa3|u1\xa4ndim\x01\xaaitem_shape\x91\x00";
        let ragged0 = b"\x82\xa5dtype\xa3<i4\xa4ndim\x00";
        let trailing = b"\x82\xa5dtype\xa3<i4\xa4ndim\x01\x00";
        let not_map = b"\x92\x01\x02";
        let bool_ndim = b"\x82\xa5dtype\xa3<i4\xa4ndim\xc3";
        let json_both = br#"{"dtype": "int32", "ndim": 1, "item_shape": [1]}"#;
        let json_neither = br#"{"dtype": "int32"}"#;
        let json_dup = br#"{"dtype": "int32", "dtype": "uint8", "ndim": 1}"#;
        let json_bom = b"\xef\xbb\xbf{\"dtype\": \"int32\", \"ndim\": 1}";
        let json_huge = br#"{"dtype": "int32", "ndim": 123456789012345678901234567890}"#;
        let json_float = br#"{"dtype": "uint8", "item_shape": [2.0]}"#;
        let json_neg = br#"{"dtype": "uint8", "item_shape": [-1]}"#;
        let json_deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        let json_nested = format!(r#"{{"dtype": "uint8", "item_shape": {}}}"#, "[".repeat(500));
        let json_unicode = "{\"dtype\": \"int32\u{e9}\", \"ndim\": 1}"
            .as_bytes()
            .to_vec();
        let json_extra = br#"{"dtype": "int32", "ndim": 1, "x": 0}"#;
        let json_trailing = br#"{"dtype": "int32", "ndim": 1} {}"#;
        let json_zero = br#"{"dtype": "uint8", "item_shape": [0]}"#;
        let json_type = br#"{"dtype": 5, "ndim": 1}"#;
        for bad in [
            &extra[..],
            missing,
            mismatch,
            zero_dim,
            ragged0,
            trailing,
            not_map,
            bool_ndim,
            b"",
            json_both,
            json_neither,
            json_dup,
            json_bom,
            json_huge,
            json_float,
            json_neg,
            json_deep.as_bytes(),
            json_nested.as_bytes(),
            &json_unicode,
            json_extra,
            json_trailing,
            json_zero,
            json_type,
        ] {
            let e = Schema::decode(bad, "/s/meta.zr").unwrap_err();
            assert!(
                matches!(e.kind(), crate::ErrorKind::Corrupt { path, .. } if path == Path::new("/s/meta.zr")),
                "{bad:?}: {e}"
            );
        }
    }
}
