//! Placement views: one global batch per step, split into contiguous
//! shards, each gathered where its device wants it.
//!
//! The rule is the one Python loaderx 2.8.19's `Loader` follows for a list
//! of views per stream: the sampler draws the step's global batch, view `v`
//! of `n` takes records `v * B / n .. (v + 1) * B / n` of it, and `B` must
//! divide by `n`. Nothing about the sampler changes, so resuming at a step
//! and sharding across hosts ([`shard`](super::DataLoaderBuilder::shard))
//! compose with views: each host draws its own global batch and splits it
//! over its devices.

use std::ops::Range;
use std::sync::Arc;

use super::{BoxError, DataLoader, DataLoaderBuilder, Staging};
use crate::adapter::{ColumnConverter, RaggedMode, TensorBatch};
use crate::error::Error;
use crate::loader::Batch;
use crate::sampler::{Sampler, SamplerMode};

/// The records of a `len`-record global batch that view `view` of `views`
/// holds: the `view`-th of `views` contiguous, equal parts.
///
/// ```
/// use loaderx_core::view_range;
///
/// assert_eq!(view_range(12, 3, 1)?, 4..8);
/// assert!(view_range(10, 3, 0).is_err()); // 10 records do not split in 3
/// # Ok::<(), loaderx_core::Error>(())
/// ```
///
/// # Errors
///
/// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) when
/// `views` is 0, `view` is not below it, or `len` does not divide by
/// `views`.
pub fn view_range(len: usize, views: usize, view: usize) -> Result<Range<usize>, Error> {
    if views == 0 || view >= views {
        return Err(Error::invalid(format!(
            "view {view} of {views}: views are numbered 0..{views}, and there is at least one"
        )));
    }
    if !len.is_multiple_of(views) {
        return Err(Error::invalid(format!(
            "a global batch of {len} records does not split into {views} equal views"
        )));
    }
    let part = len / views;
    Ok(view * part..(view + 1) * part)
}

/// One view a loader delivers: its place among the views and where its
/// batches are gathered.
pub(super) struct ViewSlot<S> {
    /// Which view (`0..count`).
    pub(super) index: usize,
    /// Its staging; `None`: the loader's.
    pub(super) staging: Option<Arc<S>>,
}

impl<S> Clone for ViewSlot<S> {
    fn clone(&self) -> Self {
        ViewSlot {
            index: self.index,
            staging: self.staging.clone(),
        }
    }
}

/// How a loader splits every global batch, and which parts it delivers.
pub(super) struct Placement<S> {
    /// Views per global batch (1: the batch is not split).
    pub(super) count: usize,
    /// The views delivered, in order (every one, or one of them).
    pub(super) slots: Vec<ViewSlot<S>>,
}

impl<S> Clone for Placement<S> {
    fn clone(&self) -> Self {
        Placement {
            count: self.count,
            slots: self.slots.clone(),
        }
    }
}

impl<S> Placement<S> {
    /// The whole batch, as one view.
    pub(super) fn whole() -> Placement<S> {
        Placement::one(0, 1)
    }

    /// The view `other` delivers, when it delivers one with the loader's
    /// staging (else the whole batch), for another staging type.
    pub(super) fn one_of<S0>(other: &Placement<S0>) -> Placement<S> {
        match other.single() {
            Some((index, count)) => Placement::one(index, count),
            None => Placement::whole(),
        }
    }

    /// View `index` of `count` alone, gathered by the loader's staging.
    pub(super) fn one(index: usize, count: usize) -> Placement<S> {
        Placement {
            count,
            slots: vec![ViewSlot {
                index,
                staging: None,
            }],
        }
    }

    /// `(index, count)` of a placement that delivers one view with the
    /// loader's staging; `None` for several.
    pub(super) fn single(&self) -> Option<(usize, usize)> {
        match &self.slots[..] {
            [slot] if slot.staging.is_none() => Some((slot.index, self.count)),
            _ => None,
        }
    }

    /// Every view of `stagings.len()`, each gathered by its staging.
    fn all(stagings: Vec<Option<Arc<S>>>) -> Placement<S> {
        Placement {
            count: stagings.len(),
            slots: stagings
                .into_iter()
                .enumerate()
                .map(|(index, staging)| ViewSlot { index, staging })
                .collect(),
        }
    }

    /// Checks that the batches `sampler` draws at steps `steps` (`(first,
    /// end)`, `None`: endless) split into `count` views: the full batch,
    /// the last batch of a resumed run's first (partial) pass and the last
    /// batch of a whole pass, each when the steps reach it. `TokenBudget`
    /// batches vary in length from step to step and are refused.
    pub(super) fn check(&self, sampler: &Sampler, steps: (u64, Option<u64>)) -> Result<(), Error> {
        if self.count == 0 {
            return Err(Error::invalid("a loader needs at least one view"));
        }
        if let Some(slot) = self.slots.iter().find(|s| s.index >= self.count) {
            return Err(Error::invalid(format!(
                "view {} of {}: views are numbered 0..{}",
                slot.index, self.count, self.count
            )));
        }
        if self.count == 1 {
            return Ok(());
        }
        if matches!(sampler.mode(), SamplerMode::TokenBudget { .. }) {
            return Err(Error::invalid(format!(
                "TokenBudget batches vary in length and do not split into {} views: \
                 give each device its own sampler shard with shard(rank, world_size)",
                self.count
            )));
        }
        view_range(sampler.batch_size(), self.count, 0)
            .map_err(|e| Error::invalid(format!("batch_size {}: {e}", sampler.batch_size())))?;
        let (first, end) = steps;
        let drawn = |k: u64| k >= first && end.is_none_or(|e| k < e);
        // A run resumed at a record position first ends the pass it resumed
        // in, in steps of its own: its last batch is one of a kind.
        let partial = sampler.partial_steps();
        if let Some(last) = partial.checked_sub(1).filter(|&k| drawn(k)) {
            let len = sampler.batch_len(last);
            view_range(len, self.count, 0).map_err(|e| {
                Error::invalid(format!(
                    "the last batch of the pass resumed at {} (step {last}) holds {len} \
                     records with drop_last(false): {e} (resume at another record \
                     position, or use drop_last(true))",
                    sampler.resumed_from().unwrap_or_default()
                ))
            })?;
        }
        // Every whole pass ends in a batch of the same length: the first
        // such end at or after `first`.
        let spe = sampler.steps_per_epoch().max(1);
        let whole_end = partial.checked_add(spe - 1).and_then(|k| {
            let passes = first.saturating_sub(k).div_ceil(spe);
            k.checked_add(passes.checked_mul(spe)?)
        });
        if let Some(last) = whole_end.filter(|&k| drawn(k)) {
            let len = sampler.batch_len(last);
            view_range(len, self.count, 0).map_err(|e| {
                Error::invalid(format!(
                    "the last batch of a pass holds {len} records with drop_last(false): {e} \
                     (use drop_last(true), or a record count that splits)"
                ))
            })?;
        }
        Ok(())
    }
}

impl<S: Staging> DataLoaderBuilder<S> {
    /// Delivers only view `index` of `count` of every step's global batch:
    /// its contiguous part [`view_range`]`(B, count, index)`, gathered into
    /// this loader's staging. `count` loaders built alike with indices
    /// `0..count` together deliver every global batch, each part once: the
    /// per-device loaders of a multi-device trainer that runs one loader per
    /// device. [`build_views`](Self::build_views) makes all the views in one
    /// loader instead.
    ///
    /// The batch size (and, with `drop_last(false)`, the last batch of a
    /// pass, and of the pass a [`resume`](Self::resume)d run ends first)
    /// must divide by `count`, checked when the loader is built for the
    /// batches it will draw; `TokenBudget` sampling is refused.
    /// [`Batch::indices`] are the view's.
    pub fn view(mut self, index: usize, count: usize) -> Self {
        self.placement = super::views::Placement::one(index, count);
        self
    }

    /// Starts a loader whose steps are `views` views of one global batch:
    /// the sampler draws the step's batch, it is split into `views`
    /// contiguous equal parts ([`view_range`]), each part is gathered into
    /// its own buffers (this builder's staging), and `transform` gets the
    /// parts in order, on the workers.
    ///
    /// ```
    /// use loaderx_core::{Codec, DataLoader, Dense, DenseWriter, SamplerMode};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let mut w = DenseWriter::<u32>::create(dir.path().join("x"), &[], Codec::Raw)?;
    /// w.append_slice(&(0..12).collect::<Vec<u32>>(), 12)?;
    /// w.close()?;
    /// let mut loader = DataLoader::builder()
    ///     .stream("x", Dense::<u32>::open(dir.path().join("x"))?)
    ///     .batch_size(6)
    ///     .mode(SamplerMode::Sequential)
    ///     .build_views(3, |views| Ok::<_, loaderx_core::Error>(
    ///         views.iter().map(|v| v.indices().to_vec()).collect::<Vec<_>>(),
    ///     ))?;
    /// assert_eq!(loader.next().unwrap()?, [[0, 1], [2, 3], [4, 5]]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`build`](Self::build), and
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument)
    /// when the batches do not split into `views` (see
    /// [`view`](Self::view), which this cannot be combined with).
    pub fn build_views<T, E, F>(self, views: usize, transform: F) -> Result<DataLoader<T>, Error>
    where
        T: Send + 'static,
        E: Into<BoxError>,
        F: Fn(Vec<Batch<S::Buffer>>) -> Result<T, E> + Send + Sync + 'static,
    {
        self.start_views(vec![None; views], move |b| transform(b).map_err(Into::into))
    }

    /// Starts a loader whose steps are views of one global batch, one per
    /// converter (e.g. per device): view `v` is gathered where
    /// `converters[v]`'s [`staging`](ColumnConverter::staging) says and
    /// converted by it; `map` gets the views' tensor
    /// batches in order, on the workers. Adapters' `devices(..)` loaders are
    /// this.
    ///
    /// # Errors
    ///
    /// As [`build_views`](Self::build_views).
    pub fn build_tensor_views<C, T, F>(
        self,
        converters: Vec<C>,
        mode: RaggedMode,
        map: F,
    ) -> Result<DataLoader<T>, Error>
    where
        C: ColumnConverter,
        C::Error: std::error::Error + Sync,
        T: Send + 'static,
        F: Fn(Vec<TensorBatch<C::Tensor>>) -> Result<T, C::Error> + Send + Sync + 'static,
    {
        let stagings: Vec<Option<Arc<C::Staging>>> = converters
            .iter()
            .map(|c| Some(Arc::new(c.staging())))
            .collect();
        // The builder's own staging serves nothing once every view has its
        // own; the first view's stands in for it.
        let first = match stagings.first() {
            Some(Some(s)) => Arc::clone(s),
            _ => return Err(Error::invalid("a loader needs at least one view")),
        };
        let mut builder = self.with_staging(first);
        if mode == RaggedMode::Packed {
            builder.packed = true;
        }
        builder.start_views(stagings, move |views| {
            let batches = views
                .into_iter()
                .zip(&converters)
                .map(|(batch, converter)| TensorBatch::convert(batch, converter, mode))
                .collect::<Result<Vec<_>, C::Error>>()?;
            map(batches).map_err(Into::into)
        })
    }

    fn start_views<T: Send + 'static>(
        mut self,
        stagings: Vec<Option<Arc<S>>>,
        transform: impl Fn(Vec<Batch<S::Buffer>>) -> Result<T, BoxError> + Send + Sync + 'static,
    ) -> Result<DataLoader<T>, Error> {
        if self.placement.count != 1 {
            return Err(Error::invalid(
                "view(index, count) delivers one view; build_views makes every view itself",
            ));
        }
        self.placement = Placement::all(stagings);
        self.start_placed(Arc::new(transform))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::loader::{BufferPool, StageRequest};
    use crate::{Codec, DType, DenseWriter, DynDense, DynRagged, ErrorKind, RaggedWriter};

    /// `(step, indices, dense bytes, ragged records)` of one view.
    type Seen = (u64, Vec<u64>, Vec<u8>, Vec<Vec<u8>>);

    fn seen(b: &Batch) -> Seen {
        let x = b.column("x").unwrap().bytes().to_vec();
        let t = b.column("t").unwrap();
        let records = t.records().map(|(_, r)| r.to_vec()).collect();
        (b.step(), b.indices().to_vec(), x, records)
    }

    /// The whole batch as the concatenation of its views.
    fn joined(views: &[Seen]) -> Seen {
        let mut out = (views[0].0, Vec::new(), Vec::new(), Vec::new());
        for v in views {
            assert_eq!(v.0, out.0);
            out.1.extend_from_slice(&v.1);
            out.2.extend_from_slice(&v.2);
            out.3.extend(v.3.iter().cloned());
        }
        out
    }

    fn builder(dir: &std::path::Path, n: u16) -> DataLoaderBuilder {
        let (x, t) = (dir.join("x"), dir.join("t"));
        if !x.exists() {
            let mut w = DenseWriter::<u16>::create(&x, &[3], Codec::Raw).unwrap();
            let data: Vec<u16> = (0..n * 3).collect();
            w.append_slice(&data, n as usize).unwrap();
            w.close().unwrap();
            let mut w = RaggedWriter::<u16>::create(&t, 1, Codec::Zstd).unwrap();
            w.append((0..n).map(|i| vec![i; 1 + i as usize % 7]))
                .unwrap();
            w.close().unwrap();
        }
        DataLoader::builder()
            .stream("x", DynDense::open(&x).unwrap())
            .stream("t", DynRagged::open(&t).unwrap())
            .batch_size(12)
            .seed(5)
    }

    #[test]
    fn views_concatenate_to_the_global_batch_in_every_mode() {
        let dir = tempfile::tempdir().unwrap();
        for mode in [
            SamplerMode::Cyclic,
            SamplerMode::Iid,
            SamplerMode::Sequential,
        ] {
            for (workers, packed) in [(0, false), (2, false), (3, true)] {
                let b = builder(dir.path(), 100)
                    .mode(mode)
                    .workers(workers)
                    .packed(packed);
                let whole: Vec<Seen> = b
                    .clone()
                    .build()
                    .unwrap()
                    .take(20)
                    .map(|r| seen(&r.unwrap()))
                    .collect();
                let split: Vec<Vec<Seen>> = b
                    .clone()
                    .build_views(3, |views| {
                        Ok::<_, Error>(views.iter().map(seen).collect::<Vec<_>>())
                    })
                    .unwrap()
                    .take(20)
                    .map(Result::unwrap)
                    .collect();
                for (w, s) in whole.iter().zip(&split) {
                    assert_eq!(s.len(), 3);
                    assert!(s.iter().all(|v| v.1.len() == 4));
                    assert_eq!(&joined(s), w, "{mode:?} workers {workers} packed {packed}");
                }
                // One loader per view delivers the same parts.
                for v in 0..3 {
                    let one: Vec<Seen> = b
                        .clone()
                        .view(v, 3)
                        .build()
                        .unwrap()
                        .take(20)
                        .map(|r| seen(&r.unwrap()))
                        .collect();
                    let want: Vec<Seen> = split.iter().map(|s| s[v].clone()).collect();
                    assert_eq!(one, want, "view {v} of {mode:?}");
                }
            }
        }
    }

    #[test]
    fn views_compose_with_resume_and_host_shards() {
        let dir = tempfile::tempdir().unwrap();
        let split = |b: DataLoaderBuilder, n: usize| -> Vec<Vec<Seen>> {
            b.build_views(2, |views| {
                Ok::<_, Error>(views.iter().map(seen).collect::<Vec<_>>())
            })
            .unwrap()
            .take(n)
            .map(Result::unwrap)
            .collect()
        };
        let run = split(builder(dir.path(), 100), 12);
        let resumed = split(builder(dir.path(), 100).start_step(7), 5);
        assert_eq!(resumed, run[7..]);
        for rank in 0..3 {
            let host = builder(dir.path(), 100).shard(rank, 3);
            let whole: Vec<Seen> = host
                .clone()
                .build()
                .unwrap()
                .take(6)
                .map(|r| seen(&r.unwrap()))
                .collect();
            let views = split(host, 6);
            for (w, v) in whole.iter().zip(&views) {
                assert_eq!(&joined(v), w, "rank {rank}");
            }
        }
    }

    #[test]
    fn batches_that_do_not_split_are_refused_when_built() {
        let dir = tempfile::tempdir().unwrap();
        let build = |b: DataLoaderBuilder, n: usize| b.build_views(n, |v| Ok::<_, Error>(v.len()));
        let err = |r: Result<DataLoader<usize>, Error>| match r {
            Err(e) => {
                assert!(matches!(e.kind(), ErrorKind::InvalidArgument { .. }), "{e}");
                e.to_string()
            }
            Ok(_) => panic!("built"),
        };
        assert!(err(build(builder(dir.path(), 100), 5)).contains("batch_size 12"));
        assert!(err(build(builder(dir.path(), 100), 0)).contains("at least one view"));
        // 100 records in batches of 12, every record once: the last holds 4.
        let passes = builder(dir.path(), 100)
            .mode(SamplerMode::Sequential)
            .drop_last(false);
        let mut ok = build(passes.clone(), 4).unwrap();
        assert_eq!(ok.nth(8).unwrap().unwrap(), 4);
        assert!(err(build(passes, 3)).contains("last batch of a pass holds 4"));
        assert!(
            err(builder(dir.path(), 100)
                .view(2, 2)
                .build_with(|b| Ok::<_, Error>(b.len())))
            .contains("numbered 0..2")
        );
        let e = builder(dir.path(), 100)
            .view(0, 2)
            .build_views(2, |v| Ok::<_, Error>(v.len()));
        assert!(err(e).contains("view(index, count)"));
        let budget = builder(dir.path(), 100).mode(SamplerMode::TokenBudget {
            max_tokens: 40,
            buckets: 2,
        });
        assert!(err(build(budget, 2)).contains("TokenBudget"));
    }

    #[test]
    fn a_resumed_run_s_batches_that_do_not_split_are_refused_when_built() {
        // 100 records in batches of 12, every record once: whole passes end
        // in a batch of 4. A run resumed at a record position ends its
        // first pass in a batch of its own; it used to be built, and fail
        // at that step.
        let dir = tempfile::tempdir().unwrap();
        let passes = builder(dir.path(), 100)
            .mode(SamplerMode::Sequential)
            .drop_last(false)
            .workers(0);
        let build = |b: DataLoaderBuilder, n: usize| b.build_views(n, |v| Ok::<_, Error>(v.len()));
        let at = |records| crate::RecordPosition { epoch: 0, records };
        // 50 left: 4 batches of 12, then 2, which 4 views do not split.
        let e = match build(passes.clone().resume(at(50)), 4) {
            Err(e) => e,
            Ok(l) => panic!("built; {:?}", l.take(12).find_map(Result::err)),
        };
        assert!(matches!(e.kind(), ErrorKind::InvalidArgument { .. }), "{e}");
        assert!(
            e.to_string()
                .contains("record 50 of pass 0 (step 4) holds 2"),
            "{e}"
        );
        // 48 left: whole batches, and the whole passes' 4 split in 4.
        let ok = build(passes.clone().resume(at(52)), 4).unwrap();
        assert!(ok.take(30).all(|r| r.unwrap() == 4));
        // ... but not in 3: the check looked at step 8 of the resumed run,
        // inside the first whole pass, rather than at its last, step 12.
        let e = match build(passes.clone().resume(at(52)), 3) {
            Err(e) => e.to_string(),
            Ok(l) => panic!("built; {:?}", l.take(30).find_map(Result::err)),
        };
        assert!(e.contains("last batch of a pass holds 4"), "{e}");
        // Only the batches the run draws count: from step 5 on, past the
        // resumed pass, or ending before the first whole pass does.
        let mut tail = build(passes.clone().resume(at(50)).start_step(5), 4).unwrap();
        assert_eq!(tail.next().unwrap().unwrap(), 4);
        let head = build(passes.clone().resume(at(52)).epochs(1), 3).unwrap();
        assert_eq!(head.map(Result::unwrap).collect::<Vec<_>>(), [3; 4]);
        // One view per loader: checked alike.
        let one = passes
            .clone()
            .resume(at(50))
            .view(1, 4)
            .build_with(|b| Ok::<_, Error>(b.len()));
        assert!(one.is_err());
    }

    /// A staging that records the requests it serves.
    struct Recording {
        pool: BufferPool,
        seen: Arc<Mutex<Vec<(usize, usize, usize)>>>,
        id: usize,
    }

    impl Staging for Recording {
        type Buffer = crate::adapter::PooledBuffer;

        fn stage(&self, r: &StageRequest<'_>) -> Result<crate::adapter::PooledBuffer, Error> {
            self.seen
                .lock()
                .unwrap()
                .push((self.id, r.view, r.stream_index));
            self.pool.take(r.bytes)
        }
    }

    /// "Tensors" that are a converter's id and the bytes it got.
    struct Tagged(usize, Arc<Recording>);

    impl ColumnConverter for Tagged {
        type Tensor = (usize, Vec<u8>);
        type Error = Error;
        type Staging = Arc<Recording>;
        fn tensor_from_bytes(
            &self,
            _: DType,
            bytes: &[u8],
            _: &[usize],
        ) -> Result<(usize, Vec<u8>), Error> {
            Ok((self.0, bytes.to_vec()))
        }
        fn staging(&self) -> Arc<Recording> {
            Arc::clone(&self.1)
        }
    }

    #[test]
    fn each_view_is_staged_and_converted_by_its_own_converter() {
        let dir = tempfile::tempdir().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let converters: Vec<Tagged> = (0..2)
            .map(|id| {
                let staging = Recording {
                    pool: BufferPool::new(4),
                    seen: Arc::clone(&requests),
                    id,
                };
                Tagged(id, Arc::new(staging))
            })
            .collect();
        let whole: Vec<Seen> = builder(dir.path(), 100)
            .build()
            .unwrap()
            .take(3)
            .map(|r| seen(&r.unwrap()))
            .collect();
        let loader = builder(dir.path(), 100)
            .workers(1)
            .build_tensor_views(converters, RaggedMode::Packed, |views| {
                let x: Vec<(usize, Vec<u8>)> = views
                    .iter()
                    .map(|v| v.dense("x").cloned())
                    .collect::<Result<_, _>>()?;
                let t: Vec<(usize, Vec<u8>)> = views
                    .iter()
                    .map(|v| v.packed("t").map(|p| p.values.clone()))
                    .collect::<Result<_, _>>()?;
                Ok((x, t))
            })
            .unwrap();
        for (step, got) in loader.take(3).enumerate() {
            let (x, t) = got.unwrap();
            assert_eq!((x[0].0, x[1].0, t[0].0, t[1].0), (0, 1, 0, 1));
            let xs: Vec<u8> = x.into_iter().flat_map(|(_, b)| b).collect();
            assert_eq!(xs, whole[step].2);
            let ts: Vec<u8> = t.into_iter().flat_map(|(_, b)| b).collect();
            assert_eq!(ts, whole[step].3.concat());
        }
        // Converter `v` staged every stream of view `v`, and nothing else.
        let requests = requests.lock().unwrap();
        assert!(requests.len() >= 3 * 2 * 2);
        assert!(requests.iter().all(|&(id, view, _)| id == view));
        assert!(requests.iter().any(|&(_, _, stream)| stream == 1));
    }
}
