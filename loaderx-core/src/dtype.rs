use std::fmt;
use std::str::FromStr;

use half::{bf16, f16};

pub use crate::float8::{F8E4M3Fn, F8E4M3Fnuz, F8E5M2, F8E5M2Fnuz, F8E8M0Fnu};

/// A complex number of two `f32`, NumPy's `complex64` (re-exported from `num-complex`).
pub type Complex32 = num_complex::Complex<f32>;
/// A complex number of two `f64`, NumPy's `complex128` (re-exported from `num-complex`).
pub type Complex64 = num_complex::Complex<f64>;

use crate::error::{Error, ErrorKind};

/// An element type known at run time.
///
/// Element types: the [`DType`] value and the compile-time [`Element`] trait.
///
/// Each type has the NumPy name Python loaderx 2.8.12 and later write into a
/// store's schema, and the classic ones also the NumPy `dtype.str` spelling
/// of the 2.4.6 [`Generation`](crate::Generation):
///
/// | Rust            | [`DType`]            | NumPy name        | NumPy `dtype.str` | bytes |
/// |-----------------|----------------------|-------------------|-------------------|-------|
/// | `bool`          | `DType::Bool`        | `bool`            | `\|b1`            | 1 |
/// | `u8`            | `DType::U8`          | `uint8`           | `\|u1`            | 1 |
/// | `i8`            | `DType::I8`          | `int8`            | `\|i1`            | 1 |
/// | `u16`           | `DType::U16`         | `uint16`          | `<u2`             | 2 |
/// | `i16`           | `DType::I16`         | `int16`           | `<i2`             | 2 |
/// | `u32`           | `DType::U32`         | `uint32`          | `<u4`             | 4 |
/// | `i32`           | `DType::I32`         | `int32`           | `<i4`             | 4 |
/// | `u64`           | `DType::U64`         | `uint64`          | `<u8`             | 8 |
/// | `i64`           | `DType::I64`         | `int64`           | `<i8`             | 8 |
/// | `half::f16`     | `DType::F16`         | `float16`         | `<f2`             | 2 |
/// | `f32`           | `DType::F32`         | `float32`         | `<f4`             | 4 |
/// | `f64`           | `DType::F64`         | `float64`         | `<f8`             | 8 |
/// | `half::bf16`    | `DType::BF16`        | `bfloat16`        | —                 | 2 |
/// | [`F8E4M3Fn`]    | `DType::F8E4M3Fn`    | `float8_e4m3fn`   | —                 | 1 |
/// | [`F8E4M3Fnuz`]  | `DType::F8E4M3Fnuz`  | `float8_e4m3fnuz` | —                 | 1 |
/// | [`F8E5M2`]      | `DType::F8E5M2`      | `float8_e5m2`     | —                 | 1 |
/// | [`F8E5M2Fnuz`]  | `DType::F8E5M2Fnuz`  | `float8_e5m2fnuz` | —                 | 1 |
/// | [`F8E8M0Fnu`]   | `DType::F8E8M0Fnu`   | `float8_e8m0fnu`  | —                 | 1 |
/// | [`Complex32`]   | `DType::C64`         | `complex64`       | `<c8`             | 8 |
/// | [`Complex64`]   | `DType::C128`        | `complex128`      | `<c16`            | 16 |
///
/// Records are stored little-endian, as NumPy writes them on every platform
/// loaderx supports. `bfloat16` and the float8 types have no NumPy spelling
/// of their own (they come from `ml_dtypes`), so the 2.4.6 generation cannot
/// express them.
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
    /// Brain floating point (`half::bf16`): f32's exponent, 7 mantissa bits.
    BF16,
    /// 8-bit float, 4 exponent bits, 3 mantissa bits, no infinities ([`F8E4M3Fn`]).
    F8E4M3Fn,
    /// 8-bit float, 4 exponent bits, 3 mantissa bits, no infinities and no
    /// negative zero ([`F8E4M3Fnuz`]).
    F8E4M3Fnuz,
    /// 8-bit float, 5 exponent bits, 2 mantissa bits, IEEE-style ([`F8E5M2`]).
    F8E5M2,
    /// 8-bit float, 5 exponent bits, 2 mantissa bits, no infinities and no
    /// negative zero ([`F8E5M2Fnuz`]).
    F8E5M2Fnuz,
    /// 8-bit unsigned power of two, the scale type of microscaling formats
    /// ([`F8E8M0Fnu`]).
    F8E8M0Fnu,
    /// Complex number of two `f32` ([`Complex32`]).
    C64,
    /// Complex number of two `f64` ([`Complex64`]).
    C128,
}

impl DType {
    /// Every supported type, in table order.
    pub const ALL: [DType; 20] = [
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
        DType::BF16,
        DType::F8E4M3Fn,
        DType::F8E4M3Fnuz,
        DType::F8E5M2,
        DType::F8E5M2Fnuz,
        DType::F8E8M0Fnu,
        DType::C64,
        DType::C128,
    ];

    /// The twelve classic types (bool, the integers, `f16` to `f64`): what
    /// every Python loaderx release reads, and every adapter maps.
    pub const CLASSIC: [DType; 12] = [
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
            DType::Bool
            | DType::U8
            | DType::I8
            | DType::F8E4M3Fn
            | DType::F8E4M3Fnuz
            | DType::F8E5M2
            | DType::F8E5M2Fnuz
            | DType::F8E8M0Fnu => 1,
            DType::U16 | DType::I16 | DType::F16 | DType::BF16 => 2,
            DType::U32 | DType::I32 | DType::F32 => 4,
            DType::U64 | DType::I64 | DType::F64 | DType::C64 => 8,
            DType::C128 => 16,
        }
    }

    /// The NumPy `dtype.str` spelling the 2.4.6 generation persists, or
    /// `None` for the types NumPy has no spelling of its own for
    /// (`bfloat16` and the float8 types).
    pub const fn numpy_str(self) -> Option<&'static str> {
        Some(match self {
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
            DType::C64 => "<c8",
            DType::C128 => "<c16",
            DType::BF16
            | DType::F8E4M3Fn
            | DType::F8E4M3Fnuz
            | DType::F8E5M2
            | DType::F8E5M2Fnuz
            | DType::F8E8M0Fnu => return None,
        })
    }

    /// The NumPy (and `ml_dtypes`) `dtype.name` that Python loaderx 2.8.12
    /// and later persist: `bool`, `uint8`, ..., `bfloat16`,
    /// `float8_e4m3fn`, ..., `complex128`.
    pub const fn numpy_name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "uint8",
            DType::I8 => "int8",
            DType::U16 => "uint16",
            DType::I16 => "int16",
            DType::U32 => "uint32",
            DType::I32 => "int32",
            DType::U64 => "uint64",
            DType::I64 => "int64",
            DType::F16 => "float16",
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::BF16 => "bfloat16",
            DType::F8E4M3Fn => "float8_e4m3fn",
            DType::F8E4M3Fnuz => "float8_e4m3fnuz",
            DType::F8E5M2 => "float8_e5m2",
            DType::F8E5M2Fnuz => "float8_e5m2fnuz",
            DType::F8E8M0Fnu => "float8_e8m0fnu",
            DType::C64 => "complex64",
            DType::C128 => "complex128",
        }
    }

    /// Parses a NumPy `dtype.str` as the 2.4.6 generation writes it.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::UnsupportedDType`] for any other string.
    pub fn from_numpy_str(s: &str) -> Result<Self, Error> {
        DType::ALL
            .into_iter()
            .find(|d| d.numpy_str() == Some(s))
            .ok_or_else(|| unsupported(s))
    }

    /// Parses a NumPy `dtype.name` as Python loaderx 2.8.12 and later write it.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::UnsupportedDType`] for any other string.
    pub fn from_numpy_name(s: &str) -> Result<Self, Error> {
        DType::ALL
            .into_iter()
            .find(|d| d.numpy_name() == s)
            .ok_or_else(|| unsupported(s))
    }

    /// The values of an integer type as `(min, max)`, `bool` as `(0, 1)`;
    /// `None` for the floating-point and complex types.
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
            DType::F16
            | DType::F32
            | DType::F64
            | DType::BF16
            | DType::F8E4M3Fn
            | DType::F8E4M3Fnuz
            | DType::F8E5M2
            | DType::F8E5M2Fnuz
            | DType::F8E8M0Fnu
            | DType::C64
            | DType::C128 => return None,
        })
    }

    /// True for the real floating-point types (`f16` to `f64`, `bf16` and
    /// the float8 types).
    pub const fn is_float(self) -> bool {
        matches!(
            self,
            DType::F16
                | DType::F32
                | DType::F64
                | DType::BF16
                | DType::F8E4M3Fn
                | DType::F8E4M3Fnuz
                | DType::F8E5M2
                | DType::F8E5M2Fnuz
                | DType::F8E8M0Fnu
        )
    }

    /// True for the complex types.
    pub const fn is_complex(self) -> bool {
        matches!(self, DType::C64 | DType::C128)
    }

    /// The short name: `bool`, `u8`, ..., `f64`, `bf16`, `f8e4m3fn`, ...,
    /// `c64`, `c128`.
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
            DType::BF16 => "bf16",
            DType::F8E4M3Fn => "f8e4m3fn",
            DType::F8E4M3Fnuz => "f8e4m3fnuz",
            DType::F8E5M2 => "f8e5m2",
            DType::F8E5M2Fnuz => "f8e5m2fnuz",
            DType::F8E8M0Fnu => "f8e8m0fnu",
            DType::C64 => "c64",
            DType::C128 => "c128",
        }
    }
}

fn unsupported(s: &str) -> Error {
    ErrorKind::UnsupportedDType {
        dtype: s.to_owned(),
    }
    .into()
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DType {
    type Err = Error;

    /// Accepts the short name (`u8`, `bf16`, ...), the NumPy name (`uint8`,
    /// `bfloat16`, ...) or the NumPy string (`|u1`, `<f2`, ...).
    fn from_str(s: &str) -> Result<Self, Error> {
        DType::ALL
            .into_iter()
            .find(|d| d.name() == s || d.numpy_name() == s)
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
    u64 => U64, i64 => I64, f16 => F16, f32 => F32, f64 => F64, bf16 => BF16,
    F8E4M3Fn => F8E4M3Fn, F8E4M3Fnuz => F8E4M3Fnuz, F8E5M2 => F8E5M2,
    F8E5M2Fnuz => F8E5M2Fnuz, F8E8M0Fnu => F8E8M0Fnu, Complex32 => C64, Complex64 => C128,
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
    fn numpy_spellings_round_trip() {
        for d in DType::ALL {
            if let Some(s) = d.numpy_str() {
                assert_eq!(DType::from_numpy_str(s).unwrap(), d);
                assert_eq!(s.parse::<DType>().unwrap(), d);
                assert_eq!(s[2..].parse::<usize>().unwrap(), d.size());
            }
            assert_eq!(DType::from_numpy_name(d.numpy_name()).unwrap(), d);
            assert_eq!(d.name().parse::<DType>().unwrap(), d);
            assert_eq!(d.numpy_name().parse::<DType>().unwrap(), d);
        }
        let unique: std::collections::HashSet<_> = DType::ALL.iter().map(|d| d.name()).collect();
        assert_eq!(unique.len(), DType::ALL.len());
        assert!(DType::from_numpy_str(">i4").is_err());
        assert!(DType::from_numpy_str("<V2").is_err());
        assert!(DType::from_numpy_name("<i4").is_err());
        assert!(DType::from_numpy_name("float8").is_err());
    }

    #[test]
    fn integer_ranges_match_their_types() {
        assert_eq!(DType::Bool.int_range(), Some((0, 1)));
        assert_eq!(DType::I8.int_range(), Some((-128, 127)));
        assert_eq!(DType::U64.int_range(), Some((0, u64::MAX.into())));
        assert_eq!(DType::F16.int_range(), None);
        for d in DType::ALL {
            assert_eq!(
                d.int_range().is_some(),
                !d.is_float() && !d.is_complex(),
                "{d}"
            );
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
