//! [`Generation`]: which Python loaderx releases' on-disk format a store is
//! in, and what each generation can express.

use std::fmt;
use std::str::FromStr;

use crate::dtype::DType;
use crate::error::{Error, StoreKind};

/// A format generation of Python loaderx: the releases that wrote one
/// on-disk layout.
///
/// Every generation shares the header, the shard tails, the 16-byte record
/// locations, the payload shards, one zstd frame per record and `dict.zr`.
/// They differ in three places only:
///
/// | generation | written by Python | schema at offset 2056 | dtype spelling | Ragged record dims |
/// |------------|------------------|-----------------------|----------------|--------------------|
/// | [`V2_4_6`](Self::V2_4_6)   | 2.4.6 – 2.8.6 | MsgPack `{dtype, ndim, item_shape}` | NumPy `dtype.str` (`<i4`) | `ndim × u64` |
/// | [`V2_8_12`](Self::V2_8_12) | 2.8.12        | MsgPack, same keys                  | NumPy name (`int32`)      | `ndim × u64` |
/// | [`V2_8_18`](Self::V2_8_18) | 2.8.18        | JSON `{"dtype", "item_shape"}` (Ragged `{"dtype", "ndim"}`) | NumPy name | `ndim × u64` |
/// | [`V2_8_19`](Self::V2_8_19) | 2.8.19        | JSON, as 2.8.18                     | NumPy name                | `ndim × u32` |
///
/// Nothing in the header names the generation. Opening a store detects it:
/// MsgPack or JSON from the schema's first byte, the dtype spelling from
/// the schema, and for a JSON Ragged store the width of the dims from the
/// first record and its length. A Dense store of 2.8.18 is byte for byte
/// one of 2.8.19, and is reported as [`V2_8_19`](Self::V2_8_19).
///
/// Writing: [`V2_4_6`](Self::V2_4_6), read by every Python release from
/// 2.4.6 to 2.8.12, and [`V2_8_19`](Self::V2_8_19), the current release's
/// ([`CreateOptions::generation`](crate::CreateOptions::generation)).
///
/// ```
/// use loaderx_core::{DType, Generation};
/// let g: Generation = "2.8.19".parse()?;
/// assert_eq!(g, Generation::V2_8_19);
/// assert!(g.supports(DType::BF16));
/// assert!(!Generation::V2_4_6.supports(DType::BF16));
/// # Ok::<(), loaderx_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Generation {
    /// MsgPack schema with NumPy `dtype.str` spellings, `u64` Ragged dims:
    /// written by Python loaderx 2.4.6 to 2.8.6.
    V2_4_6,
    /// MsgPack schema with NumPy names, `u64` Ragged dims: written by 2.8.12.
    V2_8_12,
    /// JSON schema, `u64` Ragged dims: written by 2.8.18.
    V2_8_18,
    /// JSON schema, `u32` Ragged dims (element bytes right after them):
    /// written by 2.8.19.
    V2_8_19,
}

impl Generation {
    /// Every generation, oldest first.
    pub const ALL: [Generation; 4] = [
        Generation::V2_4_6,
        Generation::V2_8_12,
        Generation::V2_8_18,
        Generation::V2_8_19,
    ];

    /// The generations this crate writes.
    pub const WRITABLE: [Generation; 2] = [Generation::V2_4_6, Generation::V2_8_19];

    /// The generation new stores are written in unless
    /// [`CreateOptions::generation`](crate::CreateOptions::generation)
    /// says otherwise: 2.8.19, which the current Python release (what
    /// `pip install loaderx` installs) reads, and the only one that holds
    /// every element type. [`V2_4_6`](Generation::V2_4_6) is for readers
    /// pinned to Python 2.4.6–2.8.12.
    pub const DEFAULT: Generation = Generation::V2_8_19;

    /// The Python release that names the generation: `"2.4.6"`, `"2.8.12"`,
    /// `"2.8.18"` or `"2.8.19"`.
    pub const fn version(self) -> &'static str {
        match self {
            Generation::V2_4_6 => "2.4.6",
            Generation::V2_8_12 => "2.8.12",
            Generation::V2_8_18 => "2.8.18",
            Generation::V2_8_19 => "2.8.19",
        }
    }

    /// The Python releases that write this generation.
    pub const fn written_by(self) -> &'static str {
        match self {
            Generation::V2_4_6 => "2.4.6 to 2.8.6",
            Generation::V2_8_12 => "2.8.12",
            Generation::V2_8_18 => "2.8.18",
            Generation::V2_8_19 => "2.8.19",
        }
    }

    /// The Python releases that read a store of this generation and kind.
    pub const fn read_by(self, kind: StoreKind) -> &'static str {
        match (self, kind) {
            (Generation::V2_4_6, _) => "2.4.6 to 2.8.12",
            (Generation::V2_8_12, _) => "2.4.6 to 2.8.12 (bfloat16 and float8 stores: 2.8.12 only)",
            (Generation::V2_8_18 | Generation::V2_8_19, StoreKind::Dense) => "2.8.18 and 2.8.19",
            (Generation::V2_8_18, StoreKind::Ragged) => "2.8.18",
            (Generation::V2_8_19, StoreKind::Ragged) => "2.8.19",
        }
    }

    /// True when this crate writes the generation ([`Generation::WRITABLE`]).
    pub const fn writable(self) -> bool {
        matches!(self, Generation::V2_4_6 | Generation::V2_8_19)
    }

    /// Whether the schema is JSON (2.8.18 on) rather than MsgPack.
    pub const fn json_schema(self) -> bool {
        matches!(self, Generation::V2_8_18 | Generation::V2_8_19)
    }

    /// Bytes of each of a Ragged record's dimension lengths: 8, or 4 for
    /// 2.8.19.
    pub const fn dim_width(self) -> usize {
        match self {
            Generation::V2_8_19 => 4,
            _ => 8,
        }
    }

    /// Whether a store of this generation can hold `dtype`: the 2.4.6
    /// generation spells types by NumPy `dtype.str`, which `bfloat16` and the
    /// float8 types do not have; the later generations hold all twenty.
    pub const fn supports(self, dtype: DType) -> bool {
        match self {
            Generation::V2_4_6 => dtype.numpy_str().is_some(),
            _ => true,
        }
    }

    /// How the schema spells `dtype` in this generation; `None` when
    /// [`supports`](Self::supports) is false.
    pub const fn dtype_spelling(self, dtype: DType) -> Option<&'static str> {
        match self {
            Generation::V2_4_6 => dtype.numpy_str(),
            _ => Some(dtype.numpy_name()),
        }
    }

    /// Refuses what this crate cannot write in this generation: a
    /// generation it does not write, or an element type the generation
    /// cannot express.
    pub(crate) fn check_writable(self, dtype: DType) -> Result<(), Error> {
        if !self.writable() {
            return Err(Error::invalid(format!(
                "this crate does not write the {self} generation; write 2.4.6 (read by Python \
                 loaderx 2.4.6 to 2.8.12) or 2.8.19"
            )));
        }
        if !self.supports(dtype) {
            return Err(Error::invalid(format!(
                "{} ({dtype}) cannot be written in the {self} generation (Python loaderx {} has \
                 no spelling for it); write the 2.8.19 generation",
                dtype.numpy_name(),
                self.read_by(StoreKind::Dense),
            )));
        }
        Ok(())
    }
}

impl Default for Generation {
    fn default() -> Generation {
        Generation::DEFAULT
    }
}

impl fmt::Display for Generation {
    /// The version that names the generation, e.g. `2.8.19`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.version())
    }
}

impl FromStr for Generation {
    type Err = Error;

    /// Parses `2.4.6`, `2.8.12`, `2.8.18` or `2.8.19`.
    fn from_str(s: &str) -> Result<Generation, Error> {
        Generation::ALL
            .into_iter()
            .find(|g| g.version() == s)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "unknown format generation {s:?}; known: 2.4.6, 2.8.12, 2.8.18, 2.8.19"
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_print() {
        for g in Generation::ALL {
            assert_eq!(g.version().parse::<Generation>().unwrap(), g);
            assert_eq!(g.to_string(), g.version());
        }
        assert!("2.8".parse::<Generation>().is_err());
        assert_eq!(Generation::default(), Generation::V2_8_19);
    }

    #[test]
    fn what_each_generation_expresses() {
        for d in DType::ALL {
            assert!(Generation::V2_8_19.supports(d));
            assert_eq!(
                Generation::V2_4_6.supports(d),
                !matches!(
                    d,
                    DType::BF16
                        | DType::F8E4M3Fn
                        | DType::F8E4M3Fnuz
                        | DType::F8E5M2
                        | DType::F8E5M2Fnuz
                        | DType::F8E8M0Fnu
                )
            );
        }
        let e = Generation::V2_4_6.check_writable(DType::BF16).unwrap_err();
        assert!(e.to_string().contains("2.8.19"), "{e}");
        assert!(Generation::V2_8_18.check_writable(DType::U8).is_err());
        assert!(Generation::V2_8_19.check_writable(DType::C128).is_ok());
    }
}
