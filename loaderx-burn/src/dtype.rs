use burn::tensor::kind::{Basic, Kind, TensorKind};
use burn::tensor::{BoolStore, DType as BurnDType, Device, IntDType, Tensor, TensorData};
use loaderx_core::host::widen;
use loaderx_core::{DType, Element};

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
        DType::F16 | DType::F32 | DType::F64 => Kind::Float,
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
/// - A loaderx type added later without a burn counterpart is
///   [`Error::Unsupported`].
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
/// store's own type. `bool` bytes are checked by core's [`widen`] (its
/// same-type entry); burn aligns the bytes it is given.
pub(crate) fn tensor_data(
    stream: &str,
    dtype: DType,
    bytes: &[u8],
    shape: &[usize],
) -> Result<TensorData> {
    let target = burn_dtype(dtype)?;
    if dtype == DType::Bool {
        widen(dtype, bytes, dtype)?;
    }
    TensorData::try_from_bytes_vec(bytes.to_vec(), shape.to_vec(), target).map_err(|e| {
        Error::Invalid(format!(
            "stream {stream:?}: {} bytes do not hold {shape:?} {dtype} values: {e:?}",
            bytes.len()
        ))
    })
}

fn int_bounds(target: IntDType) -> (i128, i128) {
    match target {
        IntDType::I64 => (i64::MIN.into(), i64::MAX.into()),
        IntDType::I32 => (i32::MIN.into(), i32::MAX.into()),
        IntDType::I16 => (i16::MIN.into(), i16::MAX.into()),
        IntDType::I8 => (i8::MIN.into(), i8::MAX.into()),
        IntDType::U64 => (0, u64::MAX.into()),
        IntDType::U32 => (0, u32::MAX.into()),
        IntDType::U16 => (0, u16::MAX.into()),
        IntDType::U8 => (0, u8::MAX.into()),
    }
}

fn source_bounds(dtype: DType) -> Option<(i128, i128)> {
    Some(match dtype {
        DType::Bool => (0, 1),
        DType::U8 => (0, u8::MAX.into()),
        DType::I8 => (i8::MIN.into(), i8::MAX.into()),
        DType::U16 => (0, u16::MAX.into()),
        DType::I16 => (i16::MIN.into(), i16::MAX.into()),
        DType::U32 => (0, u32::MAX.into()),
        DType::I32 => (i32::MIN.into(), i32::MAX.into()),
        DType::U64 => (0, u64::MAX.into()),
        DType::I64 => (i64::MIN.into(), i64::MAX.into()),
        _ => return None,
    })
}

/// The first value of `bytes` outside `lo..=hi`, read through core's
/// [`widen`] (same type: borrowed when aligned, copied when not).
fn first_outside<T: Element + Into<i128>>(
    dtype: DType,
    bytes: &[u8],
    (lo, hi): (i128, i128),
) -> Result<Option<i128>> {
    let aligned = widen(dtype, bytes, dtype)?;
    Ok(aligned
        .as_slice::<T>()?
        .iter()
        .map(|&v| v.into())
        .find(|v: &i128| *v < lo || *v > hi))
}

/// Checks that every integer of `bytes` fits the `target` integer type.
pub(crate) fn check_int_range(
    stream: &str,
    dtype: DType,
    bytes: &[u8],
    target: IntDType,
) -> Result<()> {
    let Some((lo, hi)) = source_bounds(dtype) else {
        return Ok(());
    };
    let bounds = int_bounds(target);
    if lo >= bounds.0 && hi <= bounds.1 {
        return Ok(());
    }
    let bad = match dtype {
        DType::U16 => first_outside::<u16>(dtype, bytes, bounds)?,
        DType::I16 => first_outside::<i16>(dtype, bytes, bounds)?,
        DType::U32 => first_outside::<u32>(dtype, bytes, bounds)?,
        DType::I32 => first_outside::<i32>(dtype, bytes, bounds)?,
        DType::U64 => first_outside::<u64>(dtype, bytes, bounds)?,
        DType::I64 => first_outside::<i64>(dtype, bytes, bounds)?,
        DType::U8 => first_outside::<u8>(dtype, bytes, bounds)?,
        DType::I8 => first_outside::<i8>(dtype, bytes, bounds)?,
        _ => None,
    };
    match bad {
        Some(value) => Err(Error::OutOfRange {
            stream: stream.to_owned(),
            dtype,
            value: value.to_string(),
            target: target.into(),
        }),
        None => Ok(()),
    }
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
    if shape.len() != D {
        return Err(Error::Rank {
            stream: stream.to_owned(),
            expected: D,
            found: shape.len(),
        });
    }
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
    fn every_type_has_a_kind_and_a_same_width_host_type() {
        for d in DType::ALL {
            let kind = natural_kind(d).unwrap();
            assert!(holds(kind, d), "{d}");
            assert!(holds(Kind::Float, d), "{d}");
            assert_eq!(burn_dtype(d).unwrap().size(), d.size(), "{d}");
        }
        assert!(!holds(Kind::Int, DType::F32));
        assert!(!holds(Kind::Bool, DType::U8));
        assert!(holds(Kind::Int, DType::Bool));
    }

    #[test]
    fn ranges_are_checked_only_where_they_can_overflow() {
        let big = (1u64 << 40).to_le_bytes();
        let e = check_int_range("x", DType::U64, &big, IntDType::I32).unwrap_err();
        assert!(e.to_string().contains("1099511627776"), "{e}");
        check_int_range("x", DType::U64, &big, IntDType::I64).unwrap();
        check_int_range("x", DType::U8, &[255], IntDType::I32).unwrap();
        let neg = (-1i32).to_le_bytes();
        assert!(check_int_range("x", DType::I32, &neg, IntDType::U32).is_err());
        // A misaligned slice is scanned through a copy.
        let mut bytes = [0u8; 17];
        bytes[1..9].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(check_int_range("x", DType::U64, &bytes[1..9], IntDType::I64).is_err());
    }
}
