//! Batches of framework tensors: the column conversion an adapter supplies,
//! and everything around it that is the same in every framework.

use std::sync::Arc;

use crate::error::{Error, StoreKind};
use crate::loader::{Batch, Column, Staging};

/// How Ragged streams become tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum RaggedMode {
    /// Padded to the batch's largest extent of every axis, with lengths and
    /// a mask ([`Padded`](super::Padded)).
    #[default]
    Padded,
    /// One tensor per record.
    PerRecord,
}

/// The framework-specific last step of a batch's path: one loader column to
/// the framework's tensors. Everything else (staging aside) is core's.
pub trait ColumnConverter: Send + Sync + 'static {
    /// The framework's tensor.
    type Tensor: Send + 'static;
    /// A padded Ragged stream in the framework's types.
    type Padded: Send + 'static;
    /// The adapter's error; core errors convert into it.
    type Error: From<Error> + Send + 'static;

    /// A Dense column as one `(B, *item_shape)` tensor; the column is the
    /// converter's to take its staged buffer back without a copy.
    ///
    /// # Errors
    ///
    /// When the column cannot become a tensor.
    fn dense(&self, column: Column) -> Result<Self::Tensor, Self::Error>;

    /// A Ragged column padded (see [`Column::padded`]).
    ///
    /// # Errors
    ///
    /// When the column cannot become tensors.
    fn padded(&self, column: &Column) -> Result<Self::Padded, Self::Error>;

    /// A Ragged column as one tensor per record.
    ///
    /// # Errors
    ///
    /// When a record cannot become a tensor.
    fn records(&self, column: &Column) -> Result<Vec<Self::Tensor>, Self::Error>;

    /// Where the loader gathers the batches this converter takes (e.g. the
    /// framework's own tensor storage or pinned memory), or `None` (the
    /// default) for the builder's staging.
    /// [`DataLoaderBuilder::build_tensors`](crate::DataLoaderBuilder::build_tensors),
    /// and [`PairsBuilder::build`](super::PairsBuilder::build) through it, use
    /// it in place of the builder's.
    fn staging(&self) -> Option<Arc<dyn Staging>> {
        None
    }
}

/// One stream of a [`TensorBatch`].
#[derive(Debug, Clone)]
pub enum TensorColumn<T, P> {
    /// A Dense stream: `(B, *item_shape)`.
    Dense(T),
    /// A Ragged stream, padded.
    Padded(P),
    /// A Ragged stream, one tensor per record.
    Records(Vec<T>),
}

/// A loader step as framework tensors, streams in the loader's order.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TensorBatch<T, P> {
    /// The sampler step.
    pub step: u64,
    /// The pass the step belongs to.
    pub epoch: u64,
    /// The step's position in its pass.
    pub step_in_epoch: u64,
    /// The record indices (the same for every stream).
    pub indices: Vec<u64>,
    /// `(name, column)` per stream.
    pub columns: Vec<(String, TensorColumn<T, P>)>,
}

impl<T, P> TensorBatch<T, P> {
    /// Converts a loader batch column by column with `converter`.
    ///
    /// # Errors
    ///
    /// The converter's first error.
    pub fn convert<C>(batch: Batch, converter: &C, mode: RaggedMode) -> Result<Self, C::Error>
    where
        C: ColumnConverter<Tensor = T, Padded = P>,
    {
        let (step, epoch, step_in_epoch) = (batch.step(), batch.epoch(), batch.step_in_epoch());
        let indices = batch.indices().to_vec();
        let columns = batch
            .into_columns()
            .into_iter()
            .map(|(name, column)| {
                let converted = match (column.kind(), mode) {
                    (StoreKind::Dense, _) => TensorColumn::Dense(converter.dense(column)?),
                    (_, RaggedMode::Padded) => TensorColumn::Padded(converter.padded(&column)?),
                    (_, RaggedMode::PerRecord) => {
                        TensorColumn::Records(converter.records(&column)?)
                    }
                };
                Ok((name, converted))
            })
            .collect::<Result<_, C::Error>>()?;
        Ok(TensorBatch {
            step,
            epoch,
            step_in_epoch,
            indices,
            columns,
        })
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.indices.len()
    }

    /// True when the batch holds no record (never delivered by a loader).
    pub fn is_empty(&self) -> bool {
        self.indices.is_empty()
    }

    /// Stream `name`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument)
    /// naming the streams there are, when there is no stream `name`.
    pub fn column(&self, name: &str) -> Result<&TensorColumn<T, P>, Error> {
        self.columns
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, c)| c)
            .ok_or_else(|| self.missing(name))
    }

    fn missing(&self, name: &str) -> Error {
        let names: Vec<&str> = self.columns.iter().map(|(n, _)| n.as_str()).collect();
        Error::invalid(format!(
            "the batch has no stream {name:?} (streams: {})",
            names.join(", ")
        ))
    }

    fn wrong(name: &str, want: &str, column: &TensorColumn<T, P>) -> Error {
        let found = match column {
            TensorColumn::Dense(_) => "a Dense stream",
            TensorColumn::Padded(_) => "a padded Ragged stream",
            TensorColumn::Records(_) => "a per-record Ragged stream",
        };
        Error::invalid(format!("stream {name:?} is {found}, asked for {want}"))
    }

    /// Dense stream `name`.
    ///
    /// # Errors
    ///
    /// When there is no such stream, or it is Ragged.
    pub fn dense(&self, name: &str) -> Result<&T, Error> {
        match self.column(name)? {
            TensorColumn::Dense(t) => Ok(t),
            other => Err(Self::wrong(name, "a Dense stream", other)),
        }
    }

    /// Padded Ragged stream `name`.
    ///
    /// # Errors
    ///
    /// When there is no such stream, or it is Dense or per-record.
    pub fn padded(&self, name: &str) -> Result<&P, Error> {
        match self.column(name)? {
            TensorColumn::Padded(p) => Ok(p),
            other => Err(Self::wrong(name, "a padded Ragged stream", other)),
        }
    }

    /// Per-record Ragged stream `name`.
    ///
    /// # Errors
    ///
    /// When there is no such stream, or it is Dense or padded.
    pub fn records(&self, name: &str) -> Result<&[T], Error> {
        match self.column(name)? {
            TensorColumn::Records(r) => Ok(r),
            other => Err(Self::wrong(name, "a per-record Ragged stream", other)),
        }
    }

    /// Takes stream `name` out of the batch.
    ///
    /// # Errors
    ///
    /// When there is no such stream.
    pub fn take(&mut self, name: &str) -> Result<TensorColumn<T, P>, Error> {
        let i = self
            .columns
            .iter()
            .position(|(n, _)| n == name)
            .ok_or_else(|| self.missing(name))?;
        Ok(self.columns.remove(i).1)
    }
}
