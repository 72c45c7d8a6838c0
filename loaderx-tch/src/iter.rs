//! `(xs, ys)` batches in the style of `tch::data::Iter2`, read from Zrecord
//! stores by the loaderx loader.

use loaderx_core::Stream;
use loaderx_core::adapter::{Pairs, PairsBuilder};
use tch::{Device, Tensor};

use crate::error::{Error, Result};
use crate::loader::TchConverter;

/// One pass over features `x` and targets `y` as `(xs, ys)` tensor pairs,
/// configured like `tch::data::Iter2` (`shuffle`, `to_device`,
/// `return_smaller_last_batch`), with loaderx's parallel gather and
/// prefetch underneath: the pass starts at the first `next`. Ragged streams
/// come padded.
///
/// ```
/// use loaderx_core::{Codec, Dense, DenseWriter};
/// use loaderx_tch::Iter2;
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
/// let mut iter = Iter2::new(x, y, 3);
/// iter.shuffle().return_smaller_last_batch();
/// let mut seen = 0;
/// for batch in &mut iter {
///     let (xs, ys) = batch?;
///     assert_eq!(xs.size()[0], ys.size()[0]);
///     seen += ys.size()[0];
/// }
/// assert_eq!(seen, 7); // every record once
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Iter2 {
    pairs: PairsBuilder,
    device: Device,
    seed: u64,
    running: Option<Pairs<Tensor, Error>>,
    failed: bool,
}

impl Iter2 {
    /// Batches of `batch_size` pairs of `x` and `y` (the same number of
    /// records), in record order, on the CPU, full batches only.
    pub fn new(x: impl Into<Stream>, y: impl Into<Stream>, batch_size: usize) -> Iter2 {
        Iter2 {
            pairs: PairsBuilder::new(x, y, batch_size),
            device: Device::Cpu,
            seed: 0,
            running: None,
            failed: false,
        }
    }

    /// Shuffles: the pass visits the records in a pseudo-random order (a
    /// fresh permutation; seed 0 unless [`seed`](Self::seed) says otherwise).
    pub fn shuffle(&mut self) -> &mut Iter2 {
        self.pairs.shuffle(self.seed);
        self
    }

    /// The shuffle seed (for reproducible runs; tch's `Iter2` draws from the
    /// global generator instead).
    pub fn seed(&mut self, seed: u64) -> &mut Iter2 {
        self.seed = seed;
        self.pairs.shuffle(seed);
        self
    }

    /// Batches are created on `device` (gathered into pinned memory and
    /// copied without blocking for CUDA).
    pub fn to_device(&mut self, device: Device) -> &mut Iter2 {
        self.device = device;
        self
    }

    /// Also returns the last batch when it is smaller, so every record comes once.
    pub fn return_smaller_last_batch(&mut self) -> &mut Iter2 {
        self.pairs.keep_last(true);
        self
    }

    /// Worker threads gathering and converting batches (0: synchronous, in
    /// the caller's thread).
    pub fn workers(&mut self, workers: usize) -> &mut Iter2 {
        self.pairs.workers(workers);
        self
    }
}

impl Iterator for Iter2 {
    type Item = Result<(Tensor, Tensor)>;

    /// The next pair; a configuration the loader refuses is the first item's error.
    fn next(&mut self) -> Option<Self::Item> {
        if self.running.is_none() && !self.failed {
            match self.pairs.build(TchConverter::new(self.device)) {
                Ok(pairs) => self.running = Some(pairs),
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e.into()));
                }
            }
        }
        self.running.as_mut()?.next()
    }
}
