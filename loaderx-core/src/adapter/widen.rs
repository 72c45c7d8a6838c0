//! The one widening table: element types a framework lacks become the
//! narrowest type it has that holds every value, range-checked, never
//! truncated.

use bytemuck::Pod;
use half::f16;

use super::buffer::{AlignedBuf, HostArray};
use crate::dtype::DType;
use crate::error::{Error, ErrorKind};

/// The types each type may become, narrowest first. Every entry holds every
/// value of the source, except `u64 → i64`, which is checked value by value.
fn wider(from: DType) -> &'static [DType] {
    use DType::*;
    match from {
        Bool => &[Bool, U8, I8, U16, I16, U32, I32, U64, I64],
        U8 => &[U8, U16, I16, U32, I32, U64, I64],
        I8 => &[I8, I16, I32, I64],
        U16 => &[U16, U32, I32, U64, I64],
        I16 => &[I16, I32, I64],
        U32 => &[U32, U64, I64],
        I32 => &[I32, I64],
        U64 => &[U64, I64],
        I64 => &[I64],
        F16 => &[F16, F32, F64],
        F32 => &[F32, F64],
        F64 => &[F64],
        // Converting these changes how values are represented (rounding
        // bf16 and float8 into a wider float, splitting complex numbers):
        // never implicit. A framework without them refuses them by name.
        BF16 => &[BF16],
        F8E4M3Fn => &[F8E4M3Fn],
        F8E4M3Fnuz => &[F8E4M3Fnuz],
        F8E5M2 => &[F8E5M2],
        F8E5M2Fnuz => &[F8E5M2Fnuz],
        F8E8M0Fnu => &[F8E8M0Fnu],
        C64 => &[C64],
        C128 => &[C128],
    }
}

/// What a framework holds: the element types it has, and through them the
/// type each loaderx type becomes. Adapters declare one as a constant.
///
/// ```
/// use loaderx_core::DType;
/// use loaderx_core::adapter::DTypeTable;
///
/// // A framework without bool, i8, u16 and u64.
/// const TABLE: DTypeTable = DTypeTable::new(&[
///     DType::U8, DType::I16, DType::U32, DType::I32, DType::I64,
///     DType::F16, DType::F32, DType::F64,
/// ]);
/// assert_eq!(TABLE.target(DType::I8)?, DType::I16);
/// assert_eq!(TABLE.target(DType::U64)?, DType::I64); // checked per value
/// let wide = TABLE.widen(DType::U16, &[1, 0, 2, 0])?;
/// assert_eq!(wide.dtype(), DType::U32);
/// assert_eq!(wide.as_slice::<u32>()?, &[1, 2]);
/// # Ok::<(), loaderx_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct DTypeTable {
    supported: &'static [DType],
}

impl DTypeTable {
    /// A table for a framework that has the types in `supported`.
    pub const fn new(supported: &'static [DType]) -> DTypeTable {
        DTypeTable { supported }
    }

    /// The types the framework has.
    pub fn supported(&self) -> &'static [DType] {
        self.supported
    }

    /// The type `from` becomes: itself when supported, otherwise the
    /// narrowest supported type that holds its values.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] when no supported type does.
    pub fn target(&self, from: DType) -> Result<DType, Error> {
        wider(from)
            .iter()
            .copied()
            .find(|t| self.supported.contains(t))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "no supported element type holds every {from} value (supported: {})",
                    self.supported
                        .iter()
                        .map(|d| d.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })
    }

    /// Elements of `from` in `bytes`, in the [`target`](Self::target) type;
    /// borrowed when nothing changes (same type, or `u64` values that all fit
    /// `i64`, or `bool` bytes as integers) and `bytes` is aligned for it.
    ///
    /// # Errors
    ///
    /// As [`target`](Self::target) and [`widen`].
    pub fn widen<'a>(&self, from: DType, bytes: &'a [u8]) -> Result<Widened<'a>, Error> {
        widen(from, bytes, self.target(from)?)
    }

    /// The [`target`](Self::target) type of `from` when it holds `from`'s
    /// bytes unchanged (the same type, `bool` as a one-byte integer, `u64` as
    /// `i64` once [`check`](Self::check)ed), so a buffer gathered in `from`
    /// can become the framework's tensor as it is; `None` when the values
    /// must be widened, or no supported type holds them.
    pub fn same_bytes(&self, from: DType) -> Option<DType> {
        self.target(from).ok().filter(|&to| keeps_bytes(from, to))
    }

    /// Checks, without converting, that the elements of `from` in `bytes`
    /// convert to the [`target`](Self::target) type (a whole number of them,
    /// `u64` values at most `i64::MAX` for `i64`, `bool` bytes 0 or 1), and
    /// returns that type: what a framework taking the bytes as they are
    /// ([`same_bytes`](Self::same_bytes)) needs, without [`widen`](Self::widen)'s copy.
    ///
    /// # Errors
    ///
    /// As [`target`](Self::target) and [`check_values`].
    pub fn check(&self, from: DType, bytes: &[u8]) -> Result<DType, Error> {
        let to = self.target(from)?;
        if keeps_bytes(from, to) {
            check_values(from, bytes, to)?;
        } else {
            // The rest of the table is lossless.
            check_elements(from, bytes, to)?;
        }
        Ok(to)
    }

    /// A host array in the [`target`](Self::target) type, without a copy
    /// when the bytes stay the same.
    ///
    /// # Errors
    ///
    /// As [`widen`](Self::widen).
    pub fn widen_array(&self, array: HostArray) -> Result<HostArray, Error> {
        let to = self.target(array.dtype())?;
        let (from, shape, bytes) = array.into_parts();
        let bytes = match widen(from, bytes.as_bytes(), to)?.bytes {
            Storage::Borrowed(_) => bytes,
            Storage::Owned(b) => b,
        };
        HostArray::try_new(to, shape, bytes)
    }
}

/// Elements converted by [`widen`]: borrowed when the bytes did not change.
#[derive(Debug, Clone)]
pub struct Widened<'a> {
    dtype: DType,
    bytes: Storage<'a>,
}

#[derive(Debug, Clone)]
enum Storage<'a> {
    Borrowed(&'a [u8]),
    Owned(AlignedBuf),
}

impl<'a> Widened<'a> {
    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// True when these are the caller's bytes, unchanged.
    pub fn is_borrowed(&self) -> bool {
        matches!(self.bytes, Storage::Borrowed(_))
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match &self.bytes {
            Storage::Borrowed(b) => b,
            Storage::Owned(b) => b.as_bytes(),
        }
    }

    /// The elements as `T`, without a copy.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] when `T` is not [`dtype`](Self::dtype).
    pub fn as_slice<T: crate::Element>(&self) -> Result<&[T], Error> {
        if T::DTYPE != self.dtype {
            return Err(Error::invalid(format!(
                "widened to {}, asked for {}",
                self.dtype,
                T::DTYPE
            )));
        }
        T::try_from_bytes(self.as_bytes())
            .ok_or_else(|| Error::invalid(format!("bytes are not valid {} values", T::DTYPE)))
    }

    /// The converted bytes in an aligned buffer (copied when borrowed).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Buffer`] when the copy cannot be allocated.
    pub fn into_buf(self) -> Result<AlignedBuf, Error> {
        match self.bytes {
            Storage::Borrowed(b) => AlignedBuf::from_bytes(b),
            Storage::Owned(b) => Ok(b),
        }
    }
}

fn out_of_range(from: DType, value: impl ToString, to: DType) -> Error {
    ErrorKind::OutOfRange {
        dtype: from,
        value: value.to_string(),
        target: to,
    }
    .into()
}

fn check_bools(bytes: &[u8], to: DType) -> Result<(), Error> {
    match bytes.iter().find(|&&b| b > 1) {
        Some(&b) => Err(out_of_range(DType::Bool, b, to)),
        None => Ok(()),
    }
}

fn check_u64(bytes: &[u8]) -> Result<(), Error> {
    for c in bytes.chunks_exact(8) {
        let v: u64 = bytemuck::pod_read_unaligned(c);
        if v > i64::MAX as u64 {
            return Err(out_of_range(DType::U64, v, DType::I64));
        }
    }
    Ok(())
}

/// The first element of `bytes` (any alignment) outside `lo..=hi`.
fn first_outside<S: Pod + Into<i128>>(bytes: &[u8], (lo, hi): (i128, i128)) -> Option<i128> {
    bytes
        .chunks_exact(size_of::<S>())
        .map(|c| bytemuck::pod_read_unaligned::<S>(c).into())
        .find(|v| *v < lo || *v > hi)
}

/// Checks what every conversion of `bytes` from `from` to `to` needs: a
/// whole number of elements, and `bool` bytes that are 0 or 1.
fn check_elements(from: DType, bytes: &[u8], to: DType) -> Result<(), Error> {
    if !bytes.len().is_multiple_of(from.size()) {
        return Err(Error::invalid(format!(
            "{} bytes are not a whole number of {from} values",
            bytes.len()
        )));
    }
    if from == DType::Bool {
        check_bools(bytes, to)?;
    }
    Ok(())
}

/// Checks, without converting, that every element of `from` in `bytes` (any
/// alignment) is a valid `from` value and fits the integer type `to`: what an
/// adapter needs when the framework keeps the bytes as they are (`u64` held as
/// `i64`, `bool` bytes as `u8`) or converts them itself (a device's integer
/// type). Returns at once when `to`'s range covers `from`'s; `bool` bytes
/// are always checked to be 0 or 1. A type checked against itself is always
/// fine apart from those `bool` bytes, floats included.
///
/// # Errors
///
/// [`ErrorKind::OutOfRange`] for the first value that does not fit, or a `bool`
/// byte other than 0 and 1; [`ErrorKind::InvalidArgument`] when the byte count
/// is not a whole number of elements, or `from` and `to` are different types
/// that are not both integers.
pub fn check_values(from: DType, bytes: &[u8], to: DType) -> Result<(), Error> {
    check_elements(from, bytes, to)?;
    if from == to {
        return Ok(());
    }
    let (Some(source), Some(target)) = (from.int_range(), to.int_range()) else {
        return Err(Error::invalid(format!(
            "cannot check {from} values against {to}: both must be integer types"
        )));
    };
    if source.0 >= target.0 && source.1 <= target.1 {
        return Ok(());
    }
    let bad = match from {
        DType::U8 => first_outside::<u8>(bytes, target),
        DType::I8 => first_outside::<i8>(bytes, target),
        DType::U16 => first_outside::<u16>(bytes, target),
        DType::I16 => first_outside::<i16>(bytes, target),
        DType::U32 => first_outside::<u32>(bytes, target),
        DType::I32 => first_outside::<i32>(bytes, target),
        DType::U64 => first_outside::<u64>(bytes, target),
        DType::I64 => first_outside::<i64>(bytes, target),
        // Bool fits every integer type; floats have no integer range.
        _ => None,
    };
    match bad {
        Some(value) => Err(out_of_range(from, value, to)),
        None => Ok(()),
    }
}

/// Integer conversion from `S` into `D`, element by element (any alignment).
fn ints<S, D>(src: &[u8], dst: &mut [u8], from: DType, to: DType) -> Result<(), Error>
where
    S: Pod + Into<i128>,
    D: Pod + TryFrom<i128>,
{
    let dst: &mut [D] = bytemuck::cast_slice_mut(dst);
    for (o, c) in dst.iter_mut().zip(src.chunks_exact(size_of::<S>())) {
        let v: i128 = bytemuck::pod_read_unaligned::<S>(c).into();
        *o = D::try_from(v).map_err(|_| out_of_range(from, v, to))?;
    }
    Ok(())
}

fn ints_from<S: Pod + Into<i128>>(
    src: &[u8],
    dst: &mut [u8],
    from: DType,
    to: DType,
) -> Result<(), Error> {
    match to {
        DType::U8 => ints::<S, u8>(src, dst, from, to),
        DType::I8 => ints::<S, i8>(src, dst, from, to),
        DType::U16 => ints::<S, u16>(src, dst, from, to),
        DType::I16 => ints::<S, i16>(src, dst, from, to),
        DType::U32 => ints::<S, u32>(src, dst, from, to),
        DType::I32 => ints::<S, i32>(src, dst, from, to),
        DType::U64 => ints::<S, u64>(src, dst, from, to),
        DType::I64 => ints::<S, i64>(src, dst, from, to),
        _ => Err(Error::invalid(format!("cannot widen {from} to {to}"))),
    }
}

fn floats<S: Pod, D: Pod>(src: &[u8], dst: &mut [u8], f: impl Fn(S) -> D) {
    let dst: &mut [D] = bytemuck::cast_slice_mut(dst);
    for (o, c) in dst.iter_mut().zip(src.chunks_exact(size_of::<S>())) {
        *o = f(bytemuck::pod_read_unaligned(c));
    }
}

/// Elements of `from` in `bytes` as elements of `to`, which must be in
/// `from`'s widening list (the same type always is). Borrows `bytes` when
/// the conversion keeps them unchanged and they are aligned for `to`;
/// otherwise writes a new aligned buffer. Reads any alignment.
///
/// # Errors
///
/// [`ErrorKind::OutOfRange`] for a `u64` above `i64::MAX` going to `i64`, or
/// a `bool` byte other than 0 and 1; [`ErrorKind::InvalidArgument`] when `to`
/// cannot hold every `from` value, or the byte count is not a whole number
/// of elements; [`ErrorKind::Buffer`] when the new buffer cannot be had.
pub fn widen(from: DType, bytes: &[u8], to: DType) -> Result<Widened<'_>, Error> {
    if !wider(from).contains(&to) {
        return Err(Error::invalid(format!(
            "{from} does not widen to {to} without loss"
        )));
    }
    check_elements(from, bytes, to)?;
    if keeps_bytes(from, to) {
        if from == DType::U64 && to == DType::I64 {
            check_u64(bytes)?;
        }
        let bytes = if (bytes.as_ptr() as usize).is_multiple_of(to.size()) {
            Storage::Borrowed(bytes)
        } else {
            Storage::Owned(AlignedBuf::from_bytes(bytes)?)
        };
        return Ok(Widened { dtype: to, bytes });
    }
    let n = bytes.len() / from.size();
    let len = n
        .checked_mul(to.size())
        .ok_or_else(|| Error::invalid(format!("{n} {to} values do not fit in memory")))?;
    let mut out = AlignedBuf::zeroed(len)?;
    let dst = out.as_bytes_mut();
    match from {
        DType::Bool | DType::U8 => ints_from::<u8>(bytes, dst, from, to)?,
        DType::I8 => ints_from::<i8>(bytes, dst, from, to)?,
        DType::U16 => ints_from::<u16>(bytes, dst, from, to)?,
        DType::I16 => ints_from::<i16>(bytes, dst, from, to)?,
        DType::U32 => ints_from::<u32>(bytes, dst, from, to)?,
        DType::I32 => ints_from::<i32>(bytes, dst, from, to)?,
        DType::U64 => ints_from::<u64>(bytes, dst, from, to)?,
        DType::I64 => ints_from::<i64>(bytes, dst, from, to)?,
        DType::F16 if to == DType::F32 => floats(bytes, dst, f16::to_f32),
        DType::F16 => floats(bytes, dst, f16::to_f64),
        DType::F32 => floats(bytes, dst, |v: f32| f64::from(v)),
        DType::F64
        | DType::BF16
        | DType::F8E4M3Fn
        | DType::F8E4M3Fnuz
        | DType::F8E5M2
        | DType::F8E5M2Fnuz
        | DType::F8E8M0Fnu
        | DType::C64
        | DType::C128 => unreachable_widening(from, to)?,
    }
    Ok(Widened {
        dtype: to,
        bytes: Storage::Owned(out),
    })
}

/// True when elements of `from` are valid elements of `to` byte for byte
/// (`u64` as `i64` after a range check).
fn keeps_bytes(from: DType, to: DType) -> bool {
    from == to
        || (from == DType::Bool && to.size() == 1)
        || (from == DType::U64 && to == DType::I64)
}

/// `f64`, `bf16`, the float8 and the complex types widen to nothing but
/// themselves, which the same-bytes path takes.
fn unreachable_widening(from: DType, to: DType) -> Result<(), Error> {
    Err(Error::invalid(format!("cannot widen {from} to {to}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NO_SMALL: DTypeTable = DTypeTable::new(&[
        DType::U8,
        DType::I16,
        DType::U32,
        DType::I32,
        DType::I64,
        DType::F16,
        DType::F32,
        DType::F64,
    ]);

    #[test]
    fn every_type_has_a_lossless_list_starting_with_itself() {
        for d in DType::ALL {
            let list = wider(d);
            assert_eq!(list[0], d);
            assert!(list.iter().all(|t| t.size() >= d.size()), "{d}");
        }
    }

    #[test]
    fn u64_beyond_i64_and_bad_bools_are_out_of_range() {
        let big = u64::MAX.to_le_bytes();
        let e = widen(DType::U64, &big, DType::I64).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::OutOfRange { .. }), "{e}");
        assert!(e.to_string().contains(&u64::MAX.to_string()), "{e}");
        let e = widen(DType::Bool, &[0, 1, 2], DType::U8).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::OutOfRange { .. }), "{e}");
        assert!(widen(DType::I64, &[0; 8], DType::I32).is_err());
        assert!(widen(DType::U16, &[0; 3], DType::U32).is_err());
        assert!(DTypeTable::new(&[DType::F32]).target(DType::I8).is_err());
    }

    #[test]
    fn same_bytes_are_borrowed_and_misaligned_bytes_copied() {
        let words = [7u64, 8, 9];
        let bytes: &[u8] = bytemuck::cast_slice(&words);
        let w = widen(DType::U64, bytes, DType::I64).unwrap();
        assert!(w.is_borrowed());
        assert_eq!(w.as_slice::<i64>().unwrap(), &[7, 8, 9]);
        let w = widen(DType::U64, &bytes[1..17], DType::I64).unwrap();
        assert!(!w.is_borrowed());
        assert_eq!(w.as_bytes(), &bytes[1..17]);
        assert!(w.as_slice::<i64>().is_ok());
    }

    #[test]
    fn same_bytes_and_check_follow_the_table() {
        assert_eq!(NO_SMALL.same_bytes(DType::U8), Some(DType::U8));
        assert_eq!(NO_SMALL.same_bytes(DType::Bool), Some(DType::U8));
        assert_eq!(NO_SMALL.same_bytes(DType::U64), Some(DType::I64));
        assert_eq!(NO_SMALL.same_bytes(DType::I8), None); // widened to i16
        assert_eq!(NO_SMALL.same_bytes(DType::U16), None); // widened to u32
        assert_eq!(DTypeTable::new(&[DType::F32]).same_bytes(DType::I8), None);

        let ok = 7u64.to_le_bytes();
        assert_eq!(NO_SMALL.check(DType::U64, &ok).unwrap(), DType::I64);
        let big = u64::MAX.to_le_bytes();
        let e = NO_SMALL.check(DType::U64, &big).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::OutOfRange { .. }), "{e}");
        assert!(NO_SMALL.check(DType::Bool, &[0, 1, 2]).is_err());
        assert_eq!(NO_SMALL.check(DType::F32, &[0; 8]).unwrap(), DType::F32);
        let widened = DTypeTable::new(&[DType::F64, DType::I64]);
        assert_eq!(widened.check(DType::F16, &[0; 4]).unwrap(), DType::F64);
        assert!(widened.check(DType::I8, &[0; 3]).is_ok());
        assert!(widened.check(DType::U16, &[0; 3]).is_err());
    }

    #[test]
    fn values_are_checked_only_where_they_can_overflow() {
        let big = (1u64 << 40).to_le_bytes();
        let e = check_values(DType::U64, &big, DType::I32).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::OutOfRange { .. }), "{e}");
        assert!(e.to_string().contains("1099511627776"), "{e}");
        check_values(DType::U64, &big, DType::I64).unwrap();
        check_values(DType::U8, &[255], DType::I32).unwrap();
        assert!(check_values(DType::I32, &(-1i32).to_le_bytes(), DType::U32).is_err());
        // Misaligned bytes are read as they are.
        let mut bytes = [0u8; 17];
        bytes[1..9].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(check_values(DType::U64, &bytes[1..9], DType::I64).is_err());
        // Bool bytes, floats, and what cannot be compared.
        check_values(DType::Bool, &[0, 1], DType::Bool).unwrap();
        assert!(check_values(DType::Bool, &[0, 2], DType::Bool).is_err());
        check_values(DType::F32, &[0; 8], DType::F32).unwrap();
        assert!(check_values(DType::F32, &[0; 4], DType::I64).is_err());
        assert!(check_values(DType::U16, &[0; 3], DType::U32).is_err());
    }

    proptest! {
        #[test]
        fn widening_keeps_every_value(
            values in proptest::collection::vec(any::<i64>(), 0..40),
            offset in 0usize..8,
        ) {
            // Every integer type through the table, from a misaligned copy.
            for from in [DType::U8, DType::I8, DType::U16, DType::I16, DType::U32, DType::I32,
                         DType::U64, DType::I64, DType::Bool] {
                let mut raw = vec![0u8; offset];
                let mut want = Vec::new();
                for &v in &values {
                    let (b, v): (Vec<u8>, i128) = match from {
                        DType::Bool => (vec![(v & 1) as u8], (v & 1) as i128),
                        DType::U8 => (vec![v as u8], v as u8 as i128),
                        DType::I8 => ((v as i8).to_le_bytes().to_vec(), v as i8 as i128),
                        DType::U16 => ((v as u16).to_le_bytes().to_vec(), v as u16 as i128),
                        DType::I16 => ((v as i16).to_le_bytes().to_vec(), v as i16 as i128),
                        DType::U32 => ((v as u32).to_le_bytes().to_vec(), v as u32 as i128),
                        DType::I32 => ((v as i32).to_le_bytes().to_vec(), v as i32 as i128),
                        DType::U64 => ((v as u64 >> 1).to_le_bytes().to_vec(), (v as u64 >> 1) as i128),
                        _ => (v.to_le_bytes().to_vec(), v as i128),
                    };
                    raw.extend(b);
                    want.push(v);
                }
                let to = NO_SMALL.target(from).unwrap();
                let w = NO_SMALL.widen(from, &raw[offset..]).unwrap();
                prop_assert_eq!(w.dtype(), to);
                let got: Vec<i128> = match to {
                    DType::U8 => w.as_slice::<u8>().unwrap().iter().map(|&x| x as i128).collect(),
                    DType::I16 => w.as_slice::<i16>().unwrap().iter().map(|&x| x as i128).collect(),
                    DType::U32 => w.as_slice::<u32>().unwrap().iter().map(|&x| x as i128).collect(),
                    DType::I32 => w.as_slice::<i32>().unwrap().iter().map(|&x| x as i128).collect(),
                    DType::I64 => w.as_slice::<i64>().unwrap().iter().map(|&x| x as i128).collect(),
                    other => panic!("unexpected target {other}"),
                };
                prop_assert_eq!(got, want);
            }
        }

        #[test]
        fn floats_widen_exactly(values in proptest::collection::vec(any::<f32>(), 0..40)) {
            let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            let w = widen(DType::F32, &bytes, DType::F64).unwrap();
            let got = w.as_slice::<f64>().unwrap();
            for (g, v) in got.iter().zip(&values) {
                prop_assert!(g.to_bits() == f64::from(*v).to_bits() || (g.is_nan() && v.is_nan()));
            }
            let halves: Vec<f16> = values.iter().map(|&v| f16::from_f32(v)).collect();
            let w = widen(DType::F16, bytemuck::cast_slice(&halves), DType::F32).unwrap();
            for (g, h) in w.as_slice::<f32>().unwrap().iter().zip(&halves) {
                prop_assert!(g.to_bits() == h.to_f32().to_bits() || g.is_nan());
            }
        }
    }
}
