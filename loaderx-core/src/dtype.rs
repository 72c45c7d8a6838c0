use std::fmt;
use std::str::FromStr;

use half::f16;

use crate::error::{Error, ErrorKind};

/// An element type known at run time.
///
/// Element types: the [`DType`] value and the compile-time [`Element`] trait.
///
/// Each type maps to exactly the NumPy dtype string Python loaderx writes into a
/// store's schema:
///
/// | Rust        | [`DType`]       | NumPy string | bytes |
/// |-------------|-----------------|--------------|-------|
/// | `bool`      | `DType::Bool`   | `\|b1`       | 1 |
/// | `u8`        | `DType::U8`     | `\|u1`       | 1 |
/// | `i8`        | `DType::I8`     | `\|i1`       | 1 |
/// | `u16`       | `DType::U16`    | `<u2`        | 2 |
/// | `i16`       | `DType::I16`    | `<i2`        | 2 |
/// | `u32`       | `DType::U32`    | `<u4`        | 4 |
/// | `i32`       | `DType::I32`    | `<i4`        | 4 |
/// | `u64`       | `DType::U64`    | `<u8`        | 8 |
/// | `i64`       | `DType::I64`    | `<i8`        | 8 |
/// | `half::f16` | `DType::F16`    | `<f2`        | 2 |
/// | `f32`       | `DType::F32`    | `<f4`        | 4 |
/// | `f64`       | `DType::F64`    | `<f8`        | 8 |
///
/// Records are stored little-endian, as NumPy writes them on every platform
/// loaderx supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DType {
    /// `bool`, one byte holding 0 or 1.
    Bool,
    /// `u8`.
    U8,
    /// `i8`.
    I8,
    /// `u16`.
    U16,
    /// `i16`.
    I16,
    /// `u32`.
    U32,
    /// `i32`.
    I32,
    /// `u64`.
    U64,
    /// `i64`.
    I64,
    /// IEEE half precision (`half::f16`).
    F16,
    /// `f32`.
    F32,
    /// `f64`.
    F64,
}

impl DType {
    /// Every supported type, in table order.
    pub const ALL: [DType; 12] = [
        DType::Bool,
        DType::U8,
        DType::I8,
        DType::U16,
        DType::I16,
        DType::U32,
        DType::I32,
        DType::U64,
        DType::I64,
        DType::F16,
        DType::F32,
        DType::F64,
    ];

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            DType::Bool | DType::U8 | DType::I8 => 1,
            DType::U16 | DType::I16 | DType::F16 => 2,
            DType::U32 | DType::I32 | DType::F32 => 4,
            DType::U64 | DType::I64 | DType::F64 => 8,
        }
    }

    /// The NumPy dtype string (`dtype.str`) Python loaderx persists.
    pub const fn numpy_str(self) -> &'static str {
        match self {
            DType::Bool => "|b1",
            DType::U8 => "|u1",
            DType::I8 => "|i1",
            DType::U16 => "<u2",
            DType::I16 => "<i2",
            DType::U32 => "<u4",
            DType::I32 => "<i4",
            DType::U64 => "<u8",
            DType::I64 => "<i8",
            DType::F16 => "<f2",
            DType::F32 => "<f4",
            DType::F64 => "<f8",
        }
    }

    /// Parses a NumPy dtype string as Python loaderx writes it.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::UnsupportedDType`] for any other string.
    pub fn from_numpy_str(s: &str) -> Result<Self, Error> {
        DType::ALL
            .into_iter()
            .find(|d| d.numpy_str() == s)
            .ok_or_else(|| {
                ErrorKind::UnsupportedDType {
                    dtype: s.to_owned(),
                }
                .into()
            })
    }

    /// The values of an integer type as `(min, max)`, `bool` as `(0, 1)`;
    /// `None` for the float types.
    pub const fn int_range(self) -> Option<(i128, i128)> {
        Some(match self {
            DType::Bool => (0, 1),
            DType::U8 => (0, u8::MAX as i128),
            DType::I8 => (i8::MIN as i128, i8::MAX as i128),
            DType::U16 => (0, u16::MAX as i128),
            DType::I16 => (i16::MIN as i128, i16::MAX as i128),
            DType::U32 => (0, u32::MAX as i128),
            DType::I32 => (i32::MIN as i128, i32::MAX as i128),
            DType::U64 => (0, u64::MAX as i128),
            DType::I64 => (i64::MIN as i128, i64::MAX as i128),
            DType::F16 | DType::F32 | DType::F64 => return None,
        })
    }

    /// The short name: `bool`, `u8`, ..., `f64`.
    pub const fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "u8",
            DType::I8 => "i8",
            DType::U16 => "u16",
            DType::I16 => "i16",
            DType::U32 => "u32",
            DType::I32 => "i32",
            DType::U64 => "u64",
            DType::I64 => "i64",
            DType::F16 => "f16",
            DType::F32 => "f32",
            DType::F64 => "f64",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DType {
    type Err = Error;

    /// Accepts the short name (`u8`, `f16`, ...) or the NumPy string (`|u1`, `<f2`, ...).
    fn from_str(s: &str) -> Result<Self, Error> {
        DType::ALL
            .into_iter()
            .find(|d| d.name() == s)
            .map_or_else(|| DType::from_numpy_str(s), Ok)
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A Rust type that can be a store's element type.
///
/// Implemented for exactly the types in the table of [`DType`]; sealed.
pub trait Element: sealed::Sealed + Copy + Default + Send + Sync + fmt::Debug + 'static {
    /// The run-time tag of this type.
    const DTYPE: DType;

    /// The elements' bytes, as stored (little-endian).
    fn as_bytes(values: &[Self]) -> &[u8];

    /// Reinterprets stored bytes as elements, or `None` when the length or
    /// alignment does not fit, or (for `bool`) a byte is neither 0 nor 1.
    fn try_from_bytes(bytes: &[u8]) -> Option<&[Self]>;

    /// Builds a vector of `len` elements whose bytes `fill` writes; the
    /// memory is reserved fallibly (a [`ErrorKind::Buffer`] error, not an
    /// abort, when it cannot be had).
    ///
    /// For plain numeric types `fill` writes straight into the vector's memory.
    fn filled_vec<E: From<Error>>(
        len: usize,
        fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
    ) -> Result<Option<Vec<Self>>, E>;

    /// Lets `fill` write the bytes of `dst`; returns `Ok(false)` (leaving
    /// `dst` unspecified) when the bytes are not valid elements.
    fn fill_slice<E>(
        dst: &mut [Self],
        fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
    ) -> Result<bool, E>;
}

/// `len` default elements, reserved fallibly.
pub(crate) fn zeroed_vec<T: Clone + Default>(len: usize) -> Result<Vec<T>, Error> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| ErrorKind::Buffer {
        detail: format!("cannot allocate {len} elements of {} bytes", size_of::<T>()),
    })?;
    v.resize(len, T::default());
    Ok(v)
}

macro_rules! pod_element {
    ($($t:ty => $d:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$d;

            fn as_bytes(values: &[Self]) -> &[u8] {
                bytemuck::cast_slice(values)
            }

            fn try_from_bytes(bytes: &[u8]) -> Option<&[Self]> {
                bytemuck::try_cast_slice(bytes).ok()
            }

            fn filled_vec<E: From<Error>>(
                len: usize,
                fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
            ) -> Result<Option<Vec<Self>>, E> {
                let mut v = zeroed_vec::<$t>(len)?;
                fill(bytemuck::cast_slice_mut(&mut v))?;
                Ok(Some(v))
            }

            fn fill_slice<E>(
                dst: &mut [Self],
                fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
            ) -> Result<bool, E> {
                fill(bytemuck::cast_slice_mut(dst))?;
                Ok(true)
            }
        }
    )*};
}

pod_element!(
    u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32,
    u64 => U64, i64 => I64, f16 => F16, f32 => F32, f64 => F64,
);

impl sealed::Sealed for bool {}
impl Element for bool {
    const DTYPE: DType = DType::Bool;

    fn as_bytes(values: &[Self]) -> &[u8] {
        bytemuck::cast_slice(values)
    }

    fn try_from_bytes(bytes: &[u8]) -> Option<&[Self]> {
        bytemuck::checked::try_cast_slice(bytes).ok()
    }

    /// Gathers into bytes, then checks every byte is 0 or 1 (`None` otherwise).
    fn filled_vec<E: From<Error>>(
        len: usize,
        fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
    ) -> Result<Option<Vec<Self>>, E> {
        let mut bytes = zeroed_vec::<u8>(len)?;
        fill(&mut bytes)?;
        if bytes.iter().any(|&b| b > 1) {
            return Ok(None);
        }
        Ok(Some(bytes.into_iter().map(|b| b == 1).collect()))
    }

    fn fill_slice<E>(
        dst: &mut [Self],
        fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
    ) -> Result<bool, E> {
        // The caller's slice is the size bound: an equal byte buffer.
        let mut bytes = vec![0u8; dst.len()];
        fill(&mut bytes)?;
        if bytes.iter().any(|&b| b > 1) {
            return Ok(false);
        }
        for (d, b) in dst.iter_mut().zip(bytes) {
            *d = b == 1;
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numpy_strings_round_trip() {
        for d in DType::ALL {
            assert_eq!(DType::from_numpy_str(d.numpy_str()).unwrap(), d);
            assert_eq!(d.name().parse::<DType>().unwrap(), d);
            assert_eq!(d.numpy_str()[2..].parse::<usize>().unwrap(), d.size());
        }
        assert!(DType::from_numpy_str(">i4").is_err());
        assert!(DType::from_numpy_str("<c8").is_err());
    }

    #[test]
    fn integer_ranges_match_their_types() {
        assert_eq!(DType::Bool.int_range(), Some((0, 1)));
        assert_eq!(DType::I8.int_range(), Some((-128, 127)));
        assert_eq!(DType::U64.int_range(), Some((0, u64::MAX.into())));
        assert_eq!(DType::F16.int_range(), None);
        for d in DType::ALL {
            assert_eq!(d.int_range().is_some(), !d.name().starts_with('f'), "{d}");
        }
    }

    #[test]
    fn bool_bytes_are_checked() {
        assert_eq!(bool::try_from_bytes(&[0, 1]), Some(&[false, true][..]));
        assert_eq!(bool::try_from_bytes(&[2]), None);
        let v = bool::filled_vec(2, |b| {
            b.copy_from_slice(&[1, 7]);
            Ok::<(), Error>(())
        });
        assert!(matches!(v, Ok(None)));
        let mut dst = [true; 2];
        assert!(
            !bool::fill_slice(&mut dst, |b| {
                b.copy_from_slice(&[1, 7]);
                Ok::<(), ()>(())
            })
            .unwrap()
        );
        assert!(
            bool::fill_slice(&mut dst, |b| {
                b.copy_from_slice(&[0, 1]);
                Ok::<(), ()>(())
            })
            .unwrap()
        );
        assert_eq!(dst, [false, true]);
    }
}
