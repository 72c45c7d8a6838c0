//! `(xs, ys)` batches in the style of `candle_datasets::Batcher`, read from
//! Zrecord stores by the loaderx loader.

use candle_core::{Device, Tensor};
use loaderx_core::Stream;
use loaderx_core::adapter::{Pairs, PairsBuilder};

use crate::error::Result;
use crate::loader::CandleConverter;

/// One pass over features `x` and targets `y` as `(xs, ys)` tensor pairs,
/// configured like `candle_datasets::Batcher` (batch size 16, the last
/// incomplete batch dropped, records in order), with loaderx's parallel
/// gather and prefetch underneath. Ragged streams come padded.
///
/// ```
/// use candle_core::Device;
/// use loaderx_candle::Batcher;
/// use loaderx_core::{Codec, Dense, DenseWriter};
///
/// let dir = tempfile::tempdir()?;
/// let mut w = DenseWriter::<f32>::create(dir.path().join("x"), &[2], Codec::Raw)?;
/// w.append_slice(&(0..14).map(|v| v as f32).collect::<Vec<_>>(), 7)?;
/// w.close()?;
/// let mut w = DenseWriter::<u8>::create(dir.path().join("y"), &[], Codec::Raw)?;
/// w.append_slice(&[0u8, 1, 0, 1, 0, 1, 0], 7)?;
/// w.close()?;
///
/// let (x, y) = (Dense::<f32>::open(dir.path().join("x"))?, Dense::<u8>::open(dir.path().join("y"))?);
/// // An evaluation pass: every record once, the last batch smaller.
/// let batches = Batcher::new2(x, y)
///     .batch_size(3)
///     .return_last_incomplete_batch(true)
///     .iter(&Device::Cpu)?;
/// let sizes: Vec<usize> = batches.map(|b| b.map(|(xs, _)| xs.dims()[0])).collect::<Result<_, _>>()?;
/// assert_eq!(sizes, [3, 3, 1]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Batcher {
    pairs: PairsBuilder,
}

impl Batcher {
    /// Pairs of features `x` and targets `y` (the same number of records).
    pub fn new2(x: impl Into<Stream>, y: impl Into<Stream>) -> Batcher {
        Batcher {
            pairs: PairsBuilder::new(x, y, 16),
        }
    }

    /// Records per batch (default 16).
    pub fn batch_size(mut self, batch_size: usize) -> Batcher {
        self.pairs.batch_size(batch_size);
        self
    }

    /// Also yields the last batch when it is smaller (default false).
    pub fn return_last_incomplete_batch(mut self, r: bool) -> Batcher {
        self.pairs.keep_last(r);
        self
    }

    /// Visits the records in the pseudo-random order of `seed`, a fresh
    /// permutation (candle's `Batcher` leaves shuffling to its input).
    pub fn shuffle(mut self, seed: u64) -> Batcher {
        self.pairs.shuffle(seed);
        self
    }

    /// Worker threads gathering and converting batches (0: synchronous, in
    /// the caller's thread).
    pub fn workers(mut self, workers: usize) -> Batcher {
        self.pairs.workers(workers);
        self
    }

    /// Starts the pass: `(xs, ys)` on `device`.
    ///
    /// # Errors
    ///
    /// [`Error::Core`](crate::Error::Core) for a configuration the loader
    /// refuses (streams of different lengths, a batch larger than the data
    /// without the last incomplete batch, ...).
    pub fn iter(&self, device: &Device) -> Result<Pairs<Tensor, crate::Error>> {
        Ok(self.pairs.build(CandleConverter::new(device))?)
    }
}
