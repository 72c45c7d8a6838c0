//! A batch converted once to tensors of each stream's natural kind.

use std::sync::Arc;

use burn::tensor::kind::{Basic, Kind};
use burn::tensor::{Bool, Float, Int, Tensor};
use loaderx_core::{DType, StoreKind};

use crate::dtype::{dims, natural_kind, to_tensor};
use crate::error::{Error, Result};
use crate::host::{HostBatch, Padded};

/// A flat tensor of one of the three kinds.
#[derive(Debug, Clone)]
enum AnyTensor {
    Float(Tensor<1, Float>),
    Int(Tensor<1, Int>),
    Bool(Tensor<1, Bool>),
}

impl AnyTensor {
    fn new(name: &str, dtype: DType, bytes: &[u8], n: usize, b: &HostBatch) -> Result<AnyTensor> {
        let device = b.device();
        Ok(match natural_kind(dtype)? {
            Kind::Float => AnyTensor::Float(to_tensor(name, dtype, bytes, &[n], device)?),
            Kind::Int => AnyTensor::Int(to_tensor(name, dtype, bytes, &[n], device)?),
            Kind::Bool => AnyTensor::Bool(to_tensor(name, dtype, bytes, &[n], device)?),
        })
    }

    fn kind(&self) -> Kind {
        match self {
            AnyTensor::Float(_) => Kind::Float,
            AnyTensor::Int(_) => Kind::Int,
            AnyTensor::Bool(_) => Kind::Bool,
        }
    }
}

#[derive(Debug, Clone)]
struct TensorColumn {
    dtype: DType,
    values: AnyTensor,
    shape: Vec<usize>,
    /// For Ragged streams: the flat in-record mask and the `(B, ndim)` lengths.
    padding: Option<(Tensor<1, Bool>, Tensor<2, Int>)>,
}

impl TensorColumn {
    fn from_host(b: &HostBatch, name: &str) -> Result<TensorColumn> {
        let dtype = b.dtype(name)?;
        if b.kind(name)? == loaderx_core::StoreKind::Dense {
            let (shape, bytes) = b.dense_bytes(name)?;
            let n = shape.iter().product();
            return Ok(TensorColumn {
                dtype,
                values: AnyTensor::new(name, dtype, bytes, n, b)?,
                shape: shape.to_vec(),
                padding: None,
            });
        }
        let host = b.padded_host(name)?;
        let n = host.values.len();
        let mask = to_tensor(name, DType::Bool, host.mask.bytes(), &[n], b.device())?;
        let lengths = to_tensor(
            name,
            DType::I64,
            host.lengths.bytes(),
            host.lengths.shape(),
            b.device(),
        )?;
        Ok(TensorColumn {
            dtype,
            values: AnyTensor::new(name, dtype, host.values.bytes(), n, b)?,
            shape: host.values.shape().to_vec(),
            padding: Some((mask, lengths)),
        })
    }
}

/// Every stream of a batch as burn tensors of its natural kind (see the
/// [dtype table](crate::burn_dtype)), on the batch's device: what
/// [`TensorBatcher`](crate::TensorBatcher) produces.
///
/// Dense streams are `(B, *item_shape)` tensors; Ragged ones are padded
/// ([`padded_float`](Self::padded_float) and friends). Conversions between
/// kinds happen on the device and only where lossless: `Int` and `Bool`
/// streams read as `Float`, `Bool` ones as `Int`. A stream that failed to
/// convert when the batch was built returns its error ([`Error::Column`]).
#[derive(Debug, Clone)]
pub struct TensorBatch {
    step: Option<u64>,
    indices: Vec<u64>,
    columns: Vec<(String, Result<TensorColumn, Arc<Error>>)>,
}

fn reshape<const D: usize, K: Basic>(
    name: &str,
    t: Tensor<1, K>,
    shape: &[usize],
) -> Result<Tensor<D, K>> {
    Ok(t.reshape(dims::<D>(name, shape)?))
}

impl TensorBatch {
    pub(crate) fn from_host(b: &HostBatch) -> TensorBatch {
        TensorBatch {
            step: b.step(),
            indices: b.indices().to_vec(),
            columns: b
                .names()
                .map(|name| {
                    (
                        name.to_owned(),
                        TensorColumn::from_host(b, name).map_err(Arc::new),
                    )
                })
                .collect(),
        }
    }

    /// The loader step (`None` for records stacked by a batcher).
    pub fn step(&self) -> Option<u64> {
        self.step
    }

    /// The record indices, in batch order.
    pub fn indices(&self) -> &[u64] {
        &self.indices
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.indices.len()
    }

    /// True when the batch holds no record.
    pub fn is_empty(&self) -> bool {
        self.indices.is_empty()
    }

    /// Stream names, in order.
    pub fn names(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.columns.iter().map(|(n, _)| n.as_str())
    }

    fn get(&self, name: &str) -> Result<&TensorColumn> {
        match self.columns.iter().find(|(n, _)| n == name) {
            None => Err(Error::MissingStream(name.to_owned())),
            Some((_, Err(e))) => Err(Error::Column {
                stream: name.to_owned(),
                source: Arc::clone(e),
            }),
            Some((_, Ok(c))) => Ok(c),
        }
    }

    /// The kind stream `name` was converted to.
    ///
    /// # Errors
    ///
    /// [`Error::MissingStream`] when there is no stream `name`.
    pub fn kind(&self, name: &str) -> Result<Kind> {
        Ok(self.get(name)?.values.kind())
    }

    /// The element type stream `name` was stored as.
    ///
    /// # Errors
    ///
    /// [`Error::MissingStream`] when there is no stream `name`.
    pub fn dtype(&self, name: &str) -> Result<DType> {
        Ok(self.get(name)?.dtype)
    }

    /// The batch shape of stream `name` (padded shape for Ragged streams).
    ///
    /// # Errors
    ///
    /// [`Error::MissingStream`] when there is no stream `name`.
    pub fn shape(&self, name: &str) -> Result<&[usize]> {
        Ok(&self.get(name)?.shape)
    }

    fn dense(&self, name: &str) -> Result<&TensorColumn> {
        let column = self.get(name)?;
        match column.padding {
            None => Ok(column),
            Some(_) => Err(Error::Layout {
                stream: name.to_owned(),
                expected: StoreKind::Dense,
                found: StoreKind::Ragged,
            }),
        }
    }

    fn padded<const D: usize, K: Basic>(
        &self,
        name: &str,
        convert: impl FnOnce(&TensorColumn) -> Result<Tensor<1, K>>,
    ) -> Result<Padded<D, K>> {
        let column = self.get(name)?;
        let Some((mask, lengths)) = &column.padding else {
            return Err(Error::Layout {
                stream: name.to_owned(),
                expected: StoreKind::Ragged,
                found: StoreKind::Dense,
            });
        };
        Ok(Padded {
            values: reshape(name, convert(column)?, &column.shape)?,
            lengths: lengths.clone(),
            mask: reshape(name, mask.clone(), &column.shape)?,
        })
    }

    /// A Dense stream as `Float` (from any kind).
    ///
    /// # Errors
    ///
    /// [`Error::MissingStream`] when there is no stream `name`; [`Error::Layout`] when
    /// the stream follows the other record contract; [`Error::Rank`] when `D` is not
    /// the batch's rank.
    pub fn float<const D: usize>(&self, name: &str) -> Result<Tensor<D, Float>> {
        let column = self.dense(name)?;
        reshape(name, as_float(column), &column.shape)
    }

    /// A Dense stream as `Int` (from `Int` or `Bool`).
    ///
    /// # Errors
    ///
    /// [`Error::MissingStream`] when there is no stream `name`; [`Error::Layout`] when
    /// the stream follows the other record contract; [`Error::Rank`] when `D` is not
    /// the batch's rank; [`Error::Kind`] for a `Float` stream.
    pub fn int<const D: usize>(&self, name: &str) -> Result<Tensor<D, Int>> {
        let column = self.dense(name)?;
        reshape(name, as_int(name, column)?, &column.shape)
    }

    /// A Dense `bool` stream as `Bool`.
    ///
    /// # Errors
    ///
    /// [`Error::MissingStream`] when there is no stream `name`; [`Error::Layout`] when
    /// the stream follows the other record contract; [`Error::Rank`] when `D` is not
    /// the batch's rank; [`Error::Kind`] for a stream that is not `bool`.
    pub fn bool<const D: usize>(&self, name: &str) -> Result<Tensor<D, Bool>> {
        let column = self.dense(name)?;
        reshape(name, as_bool(name, column)?, &column.shape)
    }

    /// A Ragged stream, padded, as `Float` (from any kind).
    ///
    /// # Errors
    ///
    /// [`Error::MissingStream`] when there is no stream `name`; [`Error::Layout`] when
    /// the stream follows the other record contract; [`Error::Rank`] when `D` is not
    /// the batch's rank.
    pub fn padded_float<const D: usize>(&self, name: &str) -> Result<Padded<D, Float>> {
        self.padded(name, |c| Ok(as_float(c)))
    }

    /// A Ragged stream, padded, as `Int` (from `Int` or `Bool`).
    ///
    /// # Errors
    ///
    /// As [`padded_float`](Self::padded_float); [`Error::Kind`] for a `Float` stream.
    pub fn padded_int<const D: usize>(&self, name: &str) -> Result<Padded<D, Int>> {
        self.padded(name, |c| as_int(name, c))
    }

    /// A Ragged `bool` stream, padded, as `Bool`.
    ///
    /// # Errors
    ///
    /// As [`padded_float`](Self::padded_float); [`Error::Kind`] for a stream that is
    /// not `bool`.
    pub fn padded_bool<const D: usize>(&self, name: &str) -> Result<Padded<D, Bool>> {
        self.padded(name, |c| as_bool(name, c))
    }
}

fn as_float(column: &TensorColumn) -> Tensor<1, Float> {
    match &column.values {
        AnyTensor::Float(t) => t.clone(),
        AnyTensor::Int(t) => t.clone().float(),
        AnyTensor::Bool(t) => t.clone().float(),
    }
}

fn kind_error(name: &str, column: &TensorColumn, kind: Kind) -> Error {
    Error::Kind {
        stream: name.to_owned(),
        dtype: column.dtype,
        kind,
    }
}

fn as_int(name: &str, column: &TensorColumn) -> Result<Tensor<1, Int>> {
    match &column.values {
        AnyTensor::Int(t) => Ok(t.clone()),
        AnyTensor::Bool(t) => Ok(t.clone().int()),
        AnyTensor::Float(_) => Err(kind_error(name, column, Kind::Int)),
    }
}

fn as_bool(name: &str, column: &TensorColumn) -> Result<Tensor<1, Bool>> {
    match &column.values {
        AnyTensor::Bool(t) => Ok(t.clone()),
        _ => Err(kind_error(name, column, Kind::Bool)),
    }
}
