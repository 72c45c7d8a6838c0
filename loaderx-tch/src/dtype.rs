use loaderx_core::DType;
use loaderx_core::adapter::DTypeTable;
use tch::Kind;

use crate::error::Result;

/// How loaderx element types map to tch kinds.
///
/// libtorch (as exposed by tch 0.22) has no `u16`, `u32` or `u64` kind. They
/// are widened or checked, never truncated:
///
/// | loaderx | tch `Kind` | how |
/// |---------|------------|-----|
/// | `bool`  | `Bool`     | same bytes, no copy |
/// | `u8`    | `Uint8`    | no copy |
/// | `i8`    | `Int8`     | no copy |
/// | `u16`   | `Int`      | widened to i32 |
/// | `i16`   | `Int16`    | no copy |
/// | `u32`   | `Int64`    | widened to i64 |
/// | `i32`   | `Int`      | no copy |
/// | `u64`   | `Int64`    | no copy when every value is at most `i64::MAX`; otherwise an `OutOfRange` error |
/// | `i64`   | `Int64`    | no copy |
/// | `f16`   | `Half`     | no copy |
/// | `f32`   | `Float`    | no copy |
/// | `f64`   | `Double`   | no copy |
/// | `bf16`  | `BFloat16` | no copy |
/// | `float8_e4m3fn`, `float8_e4m3fnuz`, `float8_e5m2`, `float8_e5m2fnuz` | `Float8e4m3fn`, `Float8e4m3fnuz`, `Float8e5m2`, `Float8e5m2fnuz` | no copy |
/// | `complex64`, `complex128` | `ComplexFloat`, `ComplexDouble` | no copy |
/// | `float8_e8m0fnu` | — | refused with an error naming the type (tch 0.22 has no such kind) |
///
/// "No copy" holds for Dense columns gathered through
/// [`TchStaging`](crate::TchStaging) on the CPU: the loader gathers straight
/// into the tensor's storage. For CUDA, the gather lands in pinned host
/// memory and is copied to the device without blocking.
///
/// The table lists the loaderx types libtorch has natively; core's widening
/// ([`DTypeTable::widen`]) maps the others as above.
pub const DTYPE_TABLE: DTypeTable = DTypeTable::new(&[
    DType::Bool,
    DType::U8,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::F16,
    DType::F32,
    DType::F64,
    DType::BF16,
    DType::F8E4M3Fn,
    DType::F8E4M3Fnuz,
    DType::F8E5M2,
    DType::F8E5M2Fnuz,
    DType::C64,
    DType::C128,
]);

/// The tch kind of a type libtorch has.
fn kind_of(dtype: DType) -> Kind {
    match dtype {
        DType::Bool => Kind::Bool,
        DType::U8 => Kind::Uint8,
        DType::I8 => Kind::Int8,
        DType::I16 => Kind::Int16,
        DType::I32 => Kind::Int,
        DType::F16 => Kind::Half,
        DType::F32 => Kind::Float,
        DType::F64 => Kind::Double,
        DType::BF16 => Kind::BFloat16,
        DType::F8E4M3Fn => Kind::Float8e4m3fn,
        DType::F8E4M3Fnuz => Kind::Float8e4m3fnuz,
        DType::F8E5M2 => Kind::Float8e5m2,
        DType::F8E5M2Fnuz => Kind::Float8e5m2fnuz,
        DType::C64 => Kind::ComplexFloat,
        DType::C128 => Kind::ComplexDouble,
        _ => Kind::Int64,
    }
}

/// The tch kind a loaderx element type becomes (see [`DTYPE_TABLE`]).
///
/// # Errors
///
/// [`Error::Core`](crate::Error::Core) for a type libtorch cannot hold.
pub fn tch_kind(dtype: DType) -> Result<Kind> {
    Ok(kind_of(DTYPE_TABLE.target(dtype)?))
}

/// The kind holding the store's bytes unchanged, when libtorch has one
/// (`u64` bytes are `Int64` after a range check).
pub(crate) fn same_bytes_kind(dtype: DType) -> Option<Kind> {
    DTYPE_TABLE.same_bytes(dtype).map(kind_of)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_maps_to_a_kind_at_least_as_wide() {
        for d in DType::CLASSIC {
            let k = tch_kind(d).unwrap();
            assert!(k.elt_size_in_bytes() >= d.size(), "{d}");
        }
        // 2.8.19's types libtorch has are its own kinds, byte for byte.
        for (d, k) in [
            (DType::BF16, Kind::BFloat16),
            (DType::F8E4M3Fn, Kind::Float8e4m3fn),
            (DType::F8E4M3Fnuz, Kind::Float8e4m3fnuz),
            (DType::F8E5M2, Kind::Float8e5m2),
            (DType::F8E5M2Fnuz, Kind::Float8e5m2fnuz),
            (DType::C64, Kind::ComplexFloat),
            (DType::C128, Kind::ComplexDouble),
        ] {
            assert_eq!(tch_kind(d).unwrap(), k);
            assert_eq!(same_bytes_kind(d), Some(k));
            assert_eq!(k.elt_size_in_bytes(), d.size());
        }
        let e = tch_kind(DType::F8E8M0Fnu).unwrap_err();
        assert!(e.to_string().contains("f8e8m0fnu"), "{e}");
    }
}
