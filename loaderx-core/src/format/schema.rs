//! The MsgPack record schema stored in the static page.
//!
//! Python loaderx writes `{"dtype": <numpy str>, "ndim": <int>, "item_shape": [<int>...]}`
//! for Dense stores and `{"dtype", "ndim"}` for Ragged ones. Reading accepts any
//! key order and any MsgPack integer width; missing or extra keys are rejected.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{MAX_NDIM, MAX_RECORD_LEN, MAX_SCHEMA_LEN};
use crate::dtype::DType;
use crate::error::{Error, StoreKind};

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

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    dtype: String,
    ndim: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    item_shape: Option<Vec<u64>>,
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

    /// MsgPack bytes, exactly as Python loaderx encodes the same schema.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) when the
    /// encoding fails or is longer than the 2040 bytes the static page holds.
    pub fn encode(&self) -> Result<Vec<u8>, Error> {
        let wire = Wire {
            dtype: self.dtype().numpy_str().to_owned(),
            ndim: self.ndim() as u64,
            item_shape: match self {
                Schema::Dense { item_shape, .. } => {
                    Some(item_shape.iter().map(|&d| d as u64).collect())
                }
                Schema::Ragged { .. } => None,
            },
        };
        let bytes = rmp_serde::to_vec_named(&wire)
            .map_err(|e| Error::invalid(format!("schema encoding failed: {e}")))?;
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
    /// [`ErrorKind::Corrupt`](crate::ErrorKind::Corrupt) naming `meta_path`,
    /// its detail naming the problem, for anything that is not one MsgPack map
    /// of a supported schema (missing, extra or ill-typed keys, trailing bytes,
    /// an unsupported dtype, a rank or size out of range).
    pub fn decode(bytes: &[u8], meta_path: impl AsRef<Path>) -> Result<Schema, Error> {
        Schema::decode_detail(bytes).map_err(|detail| Error::corrupt(meta_path, detail))
    }

    /// [`Schema::decode`], its error a bare detail.
    fn decode_detail(bytes: &[u8]) -> Result<Schema, String> {
        let mut cursor = std::io::Cursor::new(bytes);
        let wire = Wire::deserialize(&mut rmp_serde::Deserializer::new(&mut cursor))
            .map_err(|e| format!("bad schema: {e}"))?;
        if cursor.position() != bytes.len() as u64 {
            return Err("bad schema: trailing bytes after the MsgPack object".into());
        }
        let dtype = DType::from_numpy_str(&wire.dtype).map_err(|e| e.to_string())?;
        let ndim = usize::try_from(wire.ndim).map_err(|_| "bad schema: ndim too large")?;
        let schema = match wire.item_shape {
            Some(shape) => {
                let item_shape = shape
                    .into_iter()
                    .map(usize::try_from)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|_| "bad schema: item_shape dimension too large")?;
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
        Ok(schema)
    }
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
        let dense = Schema::dense(DType::U8, &[2, 3]).unwrap();
        assert_eq!(
            dense.encode().unwrap(),
            b"\x83\xa5dtype\xa3|u1\xa4ndim\x02\xaaitem_shape\x92\x02\x03"
        );
        let ragged = Schema::ragged(DType::I32, 2).unwrap();
        assert_eq!(
            ragged.encode().unwrap(),
            b"\x82\xa5dtype\xa3<i4\xa4ndim\x02"
        );
        assert_eq!(
            Schema::decode(&dense.encode().unwrap(), "m").unwrap(),
            dense
        );
        assert_eq!(
            Schema::decode(&ragged.encode().unwrap(), "m").unwrap(),
            ragged
        );
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
        ] {
            let e = Schema::decode(bad, "/s/meta.zr").unwrap_err();
            assert!(
                matches!(e.kind(), crate::ErrorKind::Corrupt { path, .. } if path == Path::new("/s/meta.zr")),
                "{bad:?}: {e}"
            );
        }
    }
}
