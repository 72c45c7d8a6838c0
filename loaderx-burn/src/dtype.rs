use burn::tensor::kind::{Basic, Kind, TensorKind};
use burn::tensor::{BoolStore, DType as BurnDType, Device, IntDType, Tensor, TensorData};
use loaderx_core::adapter::check_values;
use loaderx_core::{DType, ErrorKind};

use crate::error::{Error, Result};

/// The natural burn tensor kind of a loaderx element type (see [`burn_dtype`]).
///
/// # Errors
///
/// [`Error::Unsupported`] for an element type with no burn kind.
pub fn natural_kind(dtype: DType) -> Result<Kind> {
    Ok(match dtype {
        DType::Bool => Kind::Bool,
        DType::U8
        | DType::I8
        | DType::U16
        | DType::I16
        | DType::U32
        | DType::I32
        | DType::U64
        | DType::I64 => Kind::Int,
        DType::F16 | DType::BF16 | DType::F32 | DType::F64 => Kind::Float,
        other => return Err(Error::Unsupported(other)),
    })
}

/// How loaderx element types map to burn.
///
/// burn tensors have a *kind* ([`Float`](burn::tensor::Float),
/// [`Int`](burn::tensor::Int) or [`Bool`](burn::tensor::Bool)) fixed in the
/// type, and an element type chosen by the device (`Device::settings()`: on
/// `flex`, `f32`, `i32` and native `bool`). Every loaderx type has a
/// *natural kind*; the host data keeps the store's own type and burn converts
/// it to the device's type for the kind when the tensor is created:
///
/// | loaderx | host data ([`burn_dtype`]) | natural kind | as `Float` | as `Int` | as `Bool` |
/// |---------|----------------------------|--------------|------------|----------|-----------|
/// | `bool`  | `Bool(Native)` | `Bool`  | 0.0 / 1.0 | 0 / 1 | yes |
/// | `u8`    | `U8`           | `Int`   | yes | yes | refused |
/// | `i8`    | `I8`           | `Int`   | yes | yes | refused |
/// | `u16`   | `U16`          | `Int`   | yes | yes | refused |
/// | `i16`   | `I16`          | `Int`   | yes | yes | refused |
/// | `u32`   | `U32`          | `Int`   | yes | range-checked | refused |
/// | `i32`   | `I32`          | `Int`   | yes | range-checked | refused |
/// | `u64`   | `U64`          | `Int`   | yes | range-checked | refused |
/// | `i64`   | `I64`          | `Int`   | yes | range-checked | refused |
/// | `f16`   | `F16`          | `Float` | yes | refused | refused |
/// | `f32`   | `F32`          | `Float` | yes | refused | refused |
/// | `f64`   | `F64`          | `Float` | yes | refused | refused |
/// | `bf16`  | `BF16`         | `Float` | yes | refused | refused |
/// | `float8_*`, `complex64`, `complex128` | — | — | refused | refused | refused |
///
/// - **As `Float`**: any type, converted to the device's float type (a
///   rounding cast, as any float conversion; `f64` → `f32` on `flex`).
/// - **As `Int`**: integers and `bool`. Values must fit the device's integer
///   type: "range-checked" rows are scanned when the source range exceeds it
///   (e.g. `u32`, `i64` or `u64` on an `i32` device) and a value that does not
///   fit is [`Error::OutOfRange`] — never truncated or wrapped. Floats are
///   [`Error::Kind`]: the cast would drop their fraction; convert explicitly
///   on the device if that is what you want.
/// - **As `Bool`**: only `bool` streams ([`Error::Kind`] otherwise; compare
///   on the device, e.g. `int.equal_elem(1)`, to build masks from numbers).
/// - burn 0.22 has no float8 or complex element type: those stores are
///   [`Error::Unsupported`], naming the type (never reinterpreted), as is a
///   loaderx type added later without a burn counterpart.
///
/// The burn element type of the host data for a loaderx type: the same
/// values in the same width (the device converts them to its own type).
///
/// # Errors
///
/// [`Error::Unsupported`] for an element type burn has no type for.
pub fn burn_dtype(dtype: DType) -> Result<BurnDType> {
    Ok(match dtype {
        DType::Bool => BurnDType::Bool(BoolStore::Native),
        DType::U8 => BurnDType::U8,
        DType::I8 => BurnDType::I8,
        DType::U16 => BurnDType::U16,
        DType::I16 => BurnDType::I16,
        DType::U32 => BurnDType::U32,
        DType::I32 => BurnDType::I32,
        DType::U64 => BurnDType::U64,
        DType::I64 => BurnDType::I64,
        DType::F16 => BurnDType::F16,
        DType::BF16 => BurnDType::BF16,
        DType::F32 => BurnDType::F32,
        DType::F64 => BurnDType::F64,
        other => return Err(Error::Unsupported(other)),
    })
}

/// Whether a tensor of `kind` can hold `dtype`'s values (integers still
/// have their range checked against the device's type).
pub fn holds(kind: Kind, dtype: DType) -> bool {
    match (kind, natural_kind(dtype)) {
        (_, Err(_)) => false,
        (Kind::Float, Ok(_)) => true,
        (Kind::Int, Ok(natural)) => natural != Kind::Float,
        (Kind::Bool, Ok(natural)) => natural == Kind::Bool,
    }
}

/// Host data for `bytes` of `dtype` (any alignment) in `shape`, in the
/// store's own type. `bool` bytes are checked by core's [`check_values`];
/// burn aligns the bytes it is given.
pub(crate) fn tensor_data(
    stream: &str,
    dtype: DType,
    bytes: &[u8],
    shape: &[usize],
) -> Result<TensorData> {
    let target = burn_dtype(dtype)?;
    check_values(dtype, bytes, dtype)?;
    TensorData::try_from_bytes_vec(bytes.to_vec(), shape.to_vec(), target).map_err(|e| {
        Error::Invalid(format!(
            "stream {stream:?}: {} bytes do not hold {shape:?} {dtype} values: {e:?}",
            bytes.len()
        ))
    })
}

/// Checks that every integer of `bytes` fits the `target` integer type
/// (core's [`check_values`], its error named after the stream).
pub(crate) fn check_int_range(
    stream: &str,
    dtype: DType,
    bytes: &[u8],
    target: IntDType,
) -> Result<()> {
    let to = match target {
        IntDType::I64 => DType::I64,
        IntDType::I32 => DType::I32,
        IntDType::I16 => DType::I16,
        IntDType::I8 => DType::I8,
        IntDType::U64 => DType::U64,
        IntDType::U32 => DType::U32,
        IntDType::U16 => DType::U16,
        IntDType::U8 => DType::U8,
    };
    check_values(dtype, bytes, to).map_err(|e| match e.into_kind() {
        ErrorKind::OutOfRange { dtype, value, .. } => Error::OutOfRange {
            stream: stream.to_owned(),
            dtype,
            value,
            target: target.into(),
        },
        other => Error::Core(other.into()),
    })
}

/// `shape` as the dims of a rank-`D` tensor.
pub(crate) fn dims<const D: usize>(stream: &str, shape: &[usize]) -> Result<[usize; D]> {
    shape.try_into().map_err(|_| Error::Rank {
        stream: stream.to_owned(),
        expected: D,
        found: shape.len(),
    })
}

/// A `Tensor<D, K>` of `shape` on `device` from `bytes` of `dtype`, with the
/// kind and range rules of the [table](burn_dtype).
pub(crate) fn to_tensor<const D: usize, K: Basic + TensorKind>(
    stream: &str,
    dtype: DType,
    bytes: &[u8],
    shape: &[usize],
    device: &Device,
) -> Result<Tensor<D, K>> {
    if D == 0 {
        return Err(Error::Invalid(format!(
            "stream {stream:?}: burn tensors have rank 1 or more, asked for rank 0"
        )));
    }
    dims::<D>(stream, shape)?;
    natural_kind(dtype)?;
    if !holds(K::KIND, dtype) {
        return Err(Error::Kind {
            stream: stream.to_owned(),
            dtype,
            kind: K::KIND,
        });
    }
    if K::KIND == Kind::Int {
        check_int_range(stream, dtype, bytes, device.settings().int_dtype)?;
    }
    let mut data = tensor_data(stream, dtype, bytes, shape)?;
    crate::staging::stage(&mut data, device);
    Ok(Tensor::from_data(data, device))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_checked_only_where_they_can_overflow() {
        let big = (1u64 << 40).to_le_bytes();
        let e = check_int_range("x", DType::U64, &big, IntDType::I32).unwrap_err();
        assert!(matches!(e, Error::OutOfRange { .. }), "{e}");
        assert!(e.to_string().contains("1099511627776"), "{e}");
        check_int_range("x", DType::U64, &big, IntDType::I64).unwrap();
        check_int_range("x", DType::U8, &[255], IntDType::I32).unwrap();
        let neg = (-1i32).to_le_bytes();
        assert!(check_int_range("x", DType::I32, &neg, IntDType::U32).is_err());
        // A misaligned slice is read as it is.
        let mut bytes = [0u8; 17];
        bytes[1..9].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(check_int_range("x", DType::U64, &bytes[1..9], IntDType::I64).is_err());
    }
}
