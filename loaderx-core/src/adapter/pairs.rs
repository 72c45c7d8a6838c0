//! One pass over two streams as `(xs, ys)` tensor pairs: the engine of the
//! adapters' `Iter2`-style iterators (tch's `Iter2`, candle's `Batcher`).

use std::marker::PhantomData;

use super::tensors::{ColumnConverter, RaggedMode, TensorColumn};
use crate::error::Error;
use crate::loader::{DataLoader, Stream};
use crate::sampler::SamplerMode;

/// Configures [`Pairs`]: features `x` and targets `y` (Dense streams, or
/// Ragged ones padded), `batch_size` records per batch, one pass.
#[derive(Clone)]
pub struct PairsBuilder {
    x: Stream,
    y: Stream,
    batch_size: usize,
    shuffle: Option<u64>,
    keep_last: bool,
    workers: Option<usize>,
}

impl std::fmt::Debug for PairsBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PairsBuilder")
            .field("len", &self.x.len())
            .field("batch_size", &self.batch_size)
            .field("shuffle", &self.shuffle)
            .field("keep_last", &self.keep_last)
            .finish()
    }
}

impl PairsBuilder {
    /// Pairs of `x` and `y` (which must hold the same number of records),
    /// in record order, full batches only, until configured otherwise.
    pub fn new(x: impl Into<Stream>, y: impl Into<Stream>, batch_size: usize) -> PairsBuilder {
        PairsBuilder {
            x: x.into(),
            y: y.into(),
            batch_size,
            shuffle: None,
            keep_last: false,
            workers: None,
        }
    }

    /// Records per batch.
    pub fn batch_size(&mut self, batch_size: usize) -> &mut Self {
        self.batch_size = batch_size;
        self
    }

    /// Visits the records in the pseudo-random order of `seed` (a `Cyclic`
    /// pass) instead of in order.
    pub fn shuffle(&mut self, seed: u64) -> &mut Self {
        self.shuffle = Some(seed);
        self
    }

    /// Also delivers the last, smaller batch, so every record comes once.
    pub fn keep_last(&mut self, keep: bool) -> &mut Self {
        self.keep_last = keep;
        self
    }

    /// Worker threads (default: the loader's; 0: synchronous, in the
    /// caller's thread).
    pub fn workers(&mut self, workers: usize) -> &mut Self {
        self.workers = Some(workers);
        self
    }

    /// Records per pass.
    pub fn len(&self) -> u64 {
        self.x.len()
    }

    /// True when the streams hold no record.
    pub fn is_empty(&self) -> bool {
        self.x.is_empty()
    }

    /// Starts the pass, converting batches with `converter` on the workers.
    ///
    /// # Errors
    ///
    /// As [`DataLoaderBuilder::build`](crate::DataLoaderBuilder::build) (streams
    /// of different lengths, a batch larger than the data with full batches
    /// only, ...).
    pub fn build<C>(&self, converter: C) -> Result<Pairs<C::Tensor, C::Error>, Error>
    where
        C: ColumnConverter,
        C::Error: std::error::Error + Sync,
    {
        let mut builder = DataLoader::builder()
            .stream("x", self.x.clone())
            .stream("y", self.y.clone())
            .batch_size(self.batch_size)
            .mode(match self.shuffle {
                Some(_) => SamplerMode::Cyclic,
                None => SamplerMode::Sequential,
            })
            .seed(self.shuffle.unwrap_or(0))
            .drop_last(!self.keep_last)
            .epochs(1);
        if let Some(w) = self.workers {
            builder = builder.workers(w);
        }
        let loader = builder.build_tensors(converter, RaggedMode::Padded, |mut batch| {
            let one = |c: TensorColumn<C::Tensor>| match c {
                TensorColumn::Dense(t) => Ok(t),
                TensorColumn::Padded(p) => Ok(p.values),
                // RaggedMode::Padded never gives per-record or packed columns.
                TensorColumn::Records(_) | TensorColumn::Packed(_) => Err(Error::invalid(
                    "a per-record or packed column in a padded batch",
                )),
            };
            let xs = one(batch.take("x")?)?;
            let ys = one(batch.take("y")?)?;
            Ok((xs, ys))
        })?;
        Ok(Pairs {
            loader,
            error: PhantomData,
        })
    }
}

/// One pass of `(xs, ys)` batches; see [`PairsBuilder`].
pub struct Pairs<T, E> {
    loader: DataLoader<(T, T)>,
    error: PhantomData<fn() -> E>,
}

impl<T, E> Pairs<T, E> {
    /// Batches left in the pass.
    pub fn remaining(&self) -> u64 {
        self.loader.remaining_steps().unwrap_or(0)
    }
}

impl<T, E> std::fmt::Debug for Pairs<T, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pairs")
            .field("loader", &self.loader)
            .finish()
    }
}

impl<T, E: From<Error>> Iterator for Pairs<T, E> {
    type Item = Result<(T, T), E>;

    fn next(&mut self) -> Option<Self::Item> {
        self.loader.next().map(|r| r.map_err(E::from))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.loader.size_hint()
    }
}
