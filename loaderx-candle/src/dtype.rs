use candle_core::DType as CDType;
use loaderx_core::DType;
use loaderx_core::host::DTypeTable;

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
        // Not yet mapped: refused by name, never reinterpreted.
        let e = candle_dtype(DType::BF16).unwrap_err();
        assert!(e.to_string().contains("bf16"), "{e}");
        assert_eq!(candle_dtype(DType::F64).unwrap(), CDType::F64);
    }
}
