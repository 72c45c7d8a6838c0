use candle_core::DType as CDType;
use loaderx_core::DType;
use loaderx_core::adapter::DTypeTable;

use crate::error::Result;

/// How loaderx element types map to candle's.
///
/// candle has no `i8`, `u16`, `u64` or `bool`. They are mapped explicitly
/// and losslessly, or refused — never truncated:
///
/// | loaderx | candle | how |
/// |---------|--------|-----|
/// | `bool`  | `U8`   | the same 0/1 bytes, no copy |
/// | `u8`    | `U8`   | no copy |
/// | `i8`    | `I16`  | widened |
/// | `u16`   | `U32`  | widened |
/// | `i16`   | `I16`  | no copy |
/// | `u32`   | `U32`  | no copy |
/// | `i32`   | `I32`  | no copy |
/// | `u64`   | `I64`  | no copy when every value is at most `i64::MAX`; otherwise an `OutOfRange` error |
/// | `i64`   | `I64`  | no copy |
/// | `f16`   | `F16`  | no copy |
/// | `f32`   | `F32`  | no copy |
/// | `f64`   | `F64`  | no copy |
/// | `bf16`  | `BF16` | no copy |
/// | `float8_e4m3fn` | `F8E4M3` | no copy (candle's `F8E4M3` is the OCP E4M3FN format) |
/// | `float8_e8m0fnu` | `F8E8M0` | no copy (candle stores its bytes) |
/// | `float8_e4m3fnuz`, `float8_e5m2`, `float8_e5m2fnuz`, `complex64`, `complex128` | — | refused with an error naming the type: candle has no such type, and converting would change the values' representation |
///
/// "No copy" applies to Dense columns on the CPU device gathered through
/// [`CandleStaging`](crate::CandleStaging): the loader gathers straight into
/// the vector that becomes the tensor's storage.
///
/// The table lists the loaderx types candle has natively; core's widening
/// ([`DTypeTable::widen`]) maps the others as above.
pub const DTYPE_TABLE: DTypeTable = DTypeTable::new(&[
    DType::U8,
    DType::I16,
    DType::U32,
    DType::I32,
    DType::I64,
    DType::F16,
    DType::F32,
    DType::F64,
    DType::BF16,
    DType::F8E4M3Fn,
    DType::F8E8M0Fnu,
]);

/// The candle type a loaderx element type becomes (see [`DTYPE_TABLE`]).
///
/// # Errors
///
/// [`Error::Core`](crate::Error::Core) for a type candle cannot hold.
pub fn candle_dtype(dtype: DType) -> Result<CDType> {
    Ok(match DTYPE_TABLE.target(dtype)? {
        DType::U8 => CDType::U8,
        DType::I16 => CDType::I16,
        DType::U32 => CDType::U32,
        DType::I32 => CDType::I32,
        DType::F16 => CDType::F16,
        DType::F32 => CDType::F32,
        DType::F64 => CDType::F64,
        DType::BF16 => CDType::BF16,
        DType::F8E4M3Fn => CDType::F8E4M3,
        DType::F8E8M0Fnu => CDType::F8E8M0,
        _ => CDType::I64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_maps_to_a_type_at_least_as_wide() {
        for d in DType::CLASSIC {
            assert!(candle_dtype(d).unwrap().size_in_bytes() >= d.size(), "{d}");
        }
        assert_eq!(candle_dtype(DType::F64).unwrap(), CDType::F64);
        // The 2.8.19 types candle has are its own, byte for byte.
        for (d, c) in [
            (DType::BF16, CDType::BF16),
            (DType::F8E4M3Fn, CDType::F8E4M3),
            (DType::F8E8M0Fnu, CDType::F8E8M0),
        ] {
            assert_eq!(candle_dtype(d).unwrap(), c);
            assert_eq!(c.size_in_bytes(), d.size());
        }
        // The others are refused by name, never reinterpreted.
        for d in [
            DType::F8E4M3Fnuz,
            DType::F8E5M2,
            DType::F8E5M2Fnuz,
            DType::C64,
            DType::C128,
        ] {
            let e = candle_dtype(d).unwrap_err();
            assert!(e.to_string().contains(d.name()), "{e}");
        }
    }
}
