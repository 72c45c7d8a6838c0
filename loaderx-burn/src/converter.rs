//! burn on core's adapter contract: the element types burn has
//! ([`DTYPE_TABLE`]), the column converter ([`BurnConverter`]: loader
//! columns to burn's host data, [`TensorData`]) and the typed upload of that
//! data to a tensor of a kind on a device.

use burn::tensor::kind::{Basic, Kind, TensorKind};
use burn::tensor::{BoolStore, DType as BurnDType, Device, IntDType, Tensor, TensorData};
use loaderx_core::adapter::{
    ColumnBuffer, ColumnConverter, DTypeTable, StagedBuffer, TypedVec, VecBuffer, VecStaging,
    check_values,
};
use loaderx_core::{Column, DType, ErrorKind};

use crate::error::{Error, Result};

/// The loaderx element types burn's host data holds as they are: every
/// classic type and `bf16`. burn 0.22 has no float8 or complex type, and
/// core's table never converts those implicitly, so they are refused with
/// an error naming the type (see [`burn_dtype`]).
pub const DTYPE_TABLE: DTypeTable = DTypeTable::new(&[
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
    DType::BF16,
    DType::F32,
    DType::F64,
]);

/// The natural burn tensor kind of a loaderx element type (see [`burn_dtype`]).
///
/// # Errors
///
/// [`Error::Core`] for an element type burn has no type for.
pub fn natural_kind(dtype: DType) -> Result<Kind> {
    Ok(match DTYPE_TABLE.target(dtype)? {
        DType::Bool => Kind::Bool,
        DType::F16 | DType::BF16 | DType::F32 | DType::F64 => Kind::Float,
        _ => Kind::Int,
    })
}

/// How loaderx element types map to burn.
///
/// burn tensors have a *kind* ([`Float`](burn::tensor::Float),
/// [`Int`](burn::tensor::Int) or [`Bool`](burn::tensor::Bool)) fixed in the
/// type, and an element type chosen by the device (`Device::settings()`: on
/// `flex`, `f32`, `i32` and native `bool`). Every loaderx type has a
/// *natural kind*; the host data ([`BurnConverter`]) keeps the store's own
/// type and burn converts it to the device's type for the kind when the
/// tensor is created:
///
/// | loaderx | host data | natural kind | as `Float` | as `Int` | as `Bool` |
/// |---------|-----------|--------------|------------|----------|-----------|
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
///   fit is core's [`OutOfRange`](ErrorKind::OutOfRange) — never truncated or
///   wrapped. Floats are [`Error::Kind`]: the cast would drop their fraction;
///   convert explicitly on the device if that is what you want.
/// - **As `Bool`**: only `bool` streams ([`Error::Kind`] otherwise; compare
///   on the device, e.g. `int.equal_elem(1)`, to build masks from numbers).
/// - burn 0.22 has no float8 or complex element type: those stores are
///   refused by [`DTYPE_TABLE`], naming the type (never reinterpreted), as is
///   a loaderx type added later without a burn counterpart.
///
/// # Errors
///
/// [`Error::Core`] for an element type burn has no type for.
pub fn burn_dtype(dtype: DType) -> Result<BurnDType> {
    Ok(match DTYPE_TABLE.target(dtype)? {
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
        other => return Err(Error::Core(unsupported(other))),
    })
}

fn unsupported(dtype: DType) -> loaderx_core::Error {
    ErrorKind::UnsupportedDType {
        dtype: dtype.name().to_owned(),
    }
    .into()
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

/// burn's [`ColumnConverter`]: loader columns to burn's host data
/// ([`TensorData`], in the store's own element type, see [`burn_dtype`]),
/// gathered by core's [`VecStaging`] so that a Dense column's vector
/// *becomes* the data without a copy; and that data to tensors of the kind
/// asked for on the converter's device ([`tensor`](Self::tensor)).
///
/// burn's tensor kinds are part of the tensor's type, so a column stays
/// host data until the caller names the kind: [`HostBatch`](crate::HostBatch)'s
/// `float` / `int` / `bool` / `padded` / `packed` accessors are this
/// converter's [`ColumnConverter`] methods followed by [`tensor`](Self::tensor).
///
/// ```
/// use burn::tensor::{Device, Int};
/// use loaderx_burn::BurnConverter;
/// use loaderx_core::adapter::ColumnConverter;
/// use loaderx_core::{Codec, DType, DataLoader, Dense, DenseWriter};
///
/// let dir = tempfile::tempdir()?;
/// let mut w = DenseWriter::<u16>::create(dir.path().join("y"), &[], Codec::Raw)?;
/// w.append_slice(&[3, 1, 4, 1], 4)?;
/// w.close()?;
/// let converter = BurnConverter::new(&Device::flex());
/// let mut loader = DataLoader::builder()
///     .stream("y", Dense::<u16>::open(dir.path().join("y"))?)
///     .batch_size(4)
///     .mode(loaderx_core::SamplerMode::Sequential)
///     .staging(converter.staging())
///     .build()?;
/// let (_, y) = loader.next().unwrap()?.into_columns().pop().unwrap();
/// let data = converter.dense(y)?;                  // the gathered Vec<u16>, moved
/// let y = converter.tensor::<1, Int>("y", DType::U16, data)?;
/// assert_eq!(y.into_data().to_vec::<i32>()?, [3, 1, 4, 1]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct BurnConverter {
    device: Device,
}

impl BurnConverter {
    /// A converter whose tensors go to `device`.
    pub fn new(device: &Device) -> BurnConverter {
        BurnConverter {
            device: device.clone(),
        }
    }

    /// The device tensors are created on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// `data` (host data of stream `stream`, whose store type is `dtype`) as
    /// a rank-`D` tensor of kind `K` on the converter's device, by the
    /// [table](burn_dtype)'s rules. The upload is staged in pinned host
    /// memory on a CUDA device (burn's CUDA backend, or its LibTorch backend
    /// with the `tch` feature), counted in
    /// [`staging_stats`](crate::staging_stats).
    ///
    /// # Errors
    ///
    /// [`Error::Kind`] when kind `K` cannot hold `dtype` losslessly;
    /// [`Error::Stream`] around core's
    /// [`OutOfRange`](ErrorKind::OutOfRange) for an integer the device's
    /// `Int` type cannot represent; [`Error::Rank`] when `D` is not the
    /// data's rank (or is 0).
    pub fn tensor<const D: usize, K: Basic + TensorKind>(
        &self,
        stream: &str,
        dtype: DType,
        data: TensorData,
    ) -> Result<Tensor<D, K>> {
        let rank = data.shape().len();
        if D == 0 || rank != D {
            return Err(Error::Rank {
                stream: stream.to_owned(),
                expected: D,
                found: rank,
            });
        }
        if !holds(K::KIND, dtype) {
            return Err(Error::Kind {
                stream: stream.to_owned(),
                dtype,
                kind: K::KIND,
            });
        }
        if K::KIND == Kind::Int {
            let to = int_dtype(self.device.settings().int_dtype);
            check_values(dtype, data.as_bytes(), to).map_err(|e| Error::stream(stream, e))?;
        }
        Ok(crate::staging::upload(data, &self.device))
    }
}

impl ColumnConverter for BurnConverter {
    type Tensor = TensorData;
    type Error = Error;
    type Staging = VecStaging;

    fn staging(&self) -> VecStaging {
        VecStaging
    }

    /// The bytes copied into host data of the store's type (`bool` bytes
    /// checked to be 0 or 1).
    fn tensor_from_bytes(&self, dtype: DType, bytes: &[u8], shape: &[usize]) -> Result<TensorData> {
        let to = DTYPE_TABLE.check(dtype, bytes)?;
        data_from_bytes(bytes.to_vec(), shape, to)
    }

    /// The gathered vector moved into the data when the column was staged
    /// by [`VecStaging`] and holds exactly `shape` (a Dense batch, packed
    /// Ragged values); copied otherwise.
    fn buffer_tensor(&self, column: Column<VecBuffer>, shape: &[usize]) -> Result<TensorData> {
        let (dtype, len) = (column.dtype(), column.array_len(shape)?);
        match column.into_buffer() {
            ColumnBuffer::Staged(b) if b.len() == len => match b.into_vec() {
                Ok(vec) => {
                    DTYPE_TABLE.check(dtype, vec.as_bytes())?;
                    data_from_vec(vec, shape, dtype)
                }
                Err(b) => self.tensor_from_bytes(dtype, &b.as_bytes()[..len], shape),
            },
            other => self.tensor_from_bytes(dtype, &other.as_bytes()[..len], shape),
        }
    }
}

/// Host data of `shape` in `dtype` (a burn type) over `bytes`.
fn data_from_bytes(bytes: Vec<u8>, shape: &[usize], dtype: DType) -> Result<TensorData> {
    let len = bytes.len();
    TensorData::try_from_bytes_vec(bytes, shape.to_vec(), burn_dtype(dtype)?).map_err(|e| {
        Error::Core(loaderx_core::Error::from(ErrorKind::InvalidArgument {
            message: format!("{len} bytes do not hold {shape:?} {dtype} values: {e:?}"),
        }))
    })
}

/// A gathered vector (exactly `shape`'s elements of `dtype`) as host data,
/// moved.
fn data_from_vec(vec: TypedVec, shape: &[usize], dtype: DType) -> Result<TensorData> {
    let shape = shape.to_vec();
    Ok(match vec {
        TypedVec::U8(v) if dtype == DType::Bool => return data_from_bytes(v, &shape, dtype),
        TypedVec::U8(v) => TensorData::new(v, shape),
        TypedVec::I8(v) => TensorData::new(v, shape),
        TypedVec::U16(v) => TensorData::new(v, shape),
        TypedVec::I16(v) => TensorData::new(v, shape),
        TypedVec::U32(v) => TensorData::new(v, shape),
        TypedVec::I32(v) => TensorData::new(v, shape),
        TypedVec::U64(v) => TensorData::new(v, shape),
        TypedVec::I64(v) => TensorData::new(v, shape),
        TypedVec::F16(v) => TensorData::new(v, shape),
        TypedVec::BF16(v) => TensorData::new(v, shape),
        TypedVec::F32(v) => TensorData::new(v, shape),
        TypedVec::F64(v) => TensorData::new(v, shape),
        _ => return Err(Error::Core(unsupported(dtype))),
    })
}

/// The loaderx type of a device's `Int` element type.
fn int_dtype(target: IntDType) -> DType {
    match target {
        IntDType::I64 => DType::I64,
        IntDType::I32 => DType::I32,
        IntDType::I16 => DType::I16,
        IntDType::I8 => DType::I8,
        IntDType::U64 => DType::U64,
        IntDType::U32 => DType::U32,
        IntDType::U16 => DType::U16,
        IntDType::U8 => DType::U8,
    }
}

/// A `Tensor<D, K>` on `device` from `bytes` of `dtype` in `shape` (one
/// copy), by the [table](burn_dtype)'s rules.
pub(crate) fn to_tensor<const D: usize, K: Basic + TensorKind>(
    stream: &str,
    dtype: DType,
    bytes: &[u8],
    shape: &[usize],
    device: &Device,
) -> Result<Tensor<D, K>> {
    let converter = BurnConverter::new(device);
    let data = converter
        .tensor_from_bytes(dtype, bytes, shape)
        .map_err(|e| e.in_stream(stream))?;
    converter.tensor(stream, dtype, data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::Int;

    #[test]
    fn ranges_are_checked_only_where_they_can_overflow() {
        let device = Device::flex();
        let big = (1u64 << 40).to_le_bytes();
        let e = to_tensor::<1, Int>("x", DType::U64, &big, &[1], &device).unwrap_err();
        assert!(
            matches!(e.core_kind(), Some(ErrorKind::OutOfRange { .. })),
            "{e}"
        );
        assert!(e.to_string().contains("1099511627776"), "{e}");
        assert!(e.to_string().contains("\"x\""), "{e}");
        to_tensor::<1, Int>("x", DType::U8, &[255], &[1], &device).unwrap();
        // A misaligned slice is read as it is.
        let mut bytes = [0u8; 17];
        bytes[1..9].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(to_tensor::<1, Int>("x", DType::U64, &bytes[1..9], &[1], &device).is_err());
        // Rank 0 and a wrong rank are refused.
        let e = to_tensor::<0, Int>("x", DType::U8, &[1], &[], &device).unwrap_err();
        assert!(matches!(e, Error::Rank { .. }), "{e}");
        let e = to_tensor::<2, Int>("x", DType::U8, &[1], &[1], &device).unwrap_err();
        assert!(matches!(e, Error::Rank { .. }), "{e}");
    }

    #[test]
    fn staged_vectors_become_the_data_and_everything_else_is_copied() {
        let converter = BurnConverter::new(&Device::flex());
        let data = data_from_vec(TypedVec::F32(vec![1.0, 2.0]), &[2], DType::F32).unwrap();
        assert_eq!(data.as_slice::<f32>().unwrap(), &[1.0, 2.0]);
        let flags = data_from_vec(TypedVec::U8(vec![0, 1]), &[2], DType::Bool).unwrap();
        assert_eq!(flags.dtype(), BurnDType::Bool(BoolStore::Native));
        let e = converter
            .tensor_from_bytes(DType::Bool, &[0, 2], &[2])
            .unwrap_err();
        assert!(e.to_string().contains('2'), "{e}");
        let e = converter
            .tensor_from_bytes(DType::C64, &[0; 8], &[1])
            .unwrap_err();
        assert!(e.to_string().contains(DType::C64.name()), "{e}");
    }
}
