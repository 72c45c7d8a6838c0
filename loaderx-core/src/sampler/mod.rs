mod bucket;
mod feistel;
mod mixture;
mod rng;
mod stats;
mod window;

use std::sync::{Arc, Mutex};

use crate::error::Error;
use crate::sequence::LengthIndex;

pub use feistel::FeistelPermutation;
pub use mixture::{Mixture, MixtureStop};
pub use stats::OrderStats;

/// `window` of [`SamplerMode::Bucketed`] when parsed from plain `"bucketed"`.
pub(crate) const DEFAULT_WINDOW: u32 = 32;
/// `buckets` of [`SamplerMode::TokenBudget`] when not given in a parsed name.
pub(crate) const DEFAULT_BUCKETS: u32 = 32;
/// Bytes of a block of [`SamplerMode::windowed`]: 4 MiB.
pub(crate) const WINDOWED_BLOCK_BYTES: u64 = 4 << 20;
/// Blocks per window of [`SamplerMode::windowed`], and of a parsed
/// `"windowed:BLOCK"`.
pub(crate) const WINDOWED_WINDOW: u32 = 16;

/// How indices are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SamplerMode {
    /// Records in order: a circular sliding window, or whole passes from
    /// record 0 with `drop_last(false)`.
    Sequential,
    /// Uniform with replacement.
    Iid,
    /// Without replacement, a fresh permutation every pass.
    Cyclic,
    /// `Cyclic` passes whose batches hold records of similar length: each
    /// window of `window × B` records of the pass is sorted by length
    /// before it is cut into batches, and the batch order is shuffled.
    /// Needs [`lengths`](SamplerBuilder::lengths); see the
    /// [`Sampler` docs](Sampler#length-aware-modes).
    Bucketed {
        /// Batches per sorted window (`k`, at least 1): larger windows give
        /// closer lengths within a batch and less randomness.
        window: u32,
    },
    /// Batches of as many records as fit `max_tokens` after padding to the
    /// batch's longest record (at most the batch size), from `buckets`
    /// length buckets. Needs [`lengths`](SamplerBuilder::lengths); see the
    /// [`Sampler` docs](Sampler#length-aware-modes).
    TokenBudget {
        /// Tokens a padded batch may hold (`records × longest`).
        max_tokens: u64,
        /// Length buckets (at least 1): more buckets, less padding, more
        /// partial batches.
        buckets: u32,
    },
    /// Without replacement, for media that read sequentially far faster
    /// than at random (spinning disks, network file systems, a store much
    /// larger than memory on a drive that prefers long reads): every pass
    /// visits blocks of `block` consecutive records in a fresh random
    /// order, and shuffles the records within each window of `window`
    /// consecutive blocks of that order. Steps, passes, `drop_last`,
    /// sharding, elastic resume and [record positions](RecordPosition) are
    /// exactly `Cyclic`'s; only the pass's order differs. See the
    /// [`Sampler` docs](Sampler#windowed-order-for-slow-media), and
    /// [`SamplerMode::windowed`] for a block sized in bytes.
    Windowed {
        /// Records per block (at least 1): choose `block × record size`
        /// ≈ 1–8 MiB, a read the drive serves at its sequential speed.
        block: u32,
        /// Blocks per window (at least 1), ≈ 8–64: a batch draws from about
        /// this many blocks, so larger windows give more random batches
        /// and keep more blocks in flight (`window × block × record size`
        /// bytes in the page cache or the block cache).
        window: u32,
    },
    /// [`Windowed`](SamplerMode::Windowed) with the dataset's parts as its
    /// blocks, whatever their sizes: a lazily converted parquet dataset's
    /// row groups ([`Dataset::lazy`](crate::Dataset::lazy)), so that every
    /// row group is fetched once a pass while its window is open. The
    /// parts come from [`SamplerBuilder::parts`], which a
    /// [`DataLoaderBuilder`](crate::DataLoaderBuilder) sets from its first
    /// stream. `window` is the one knob between shuffle quality and cache
    /// bytes: a batch draws from about `window` parts, and about `window`
    /// parts (plus the look-ahead's) are cached at once. A pass's windows
    /// ramp up (1, 2, 4, … parts, then `window`), so its first batch needs
    /// one part, and the first pass starts with part 0, which
    /// [`Dataset::lazy`](crate::Dataset::lazy) converts as it opens: the
    /// first batch needs nothing more.
    PartWindowed {
        /// Parts per window (at least 1).
        window: u32,
    },
}

impl SamplerMode {
    /// [`Windowed`](SamplerMode::Windowed) with blocks of about 4 MiB for
    /// records of `record_bytes` bytes (the mean, for a Ragged store), and
    /// windows of 16 blocks (the window a parsed `"windowed:BLOCK"` gets): a batch draws from about 16 regions of 4 MiB, 64 MiB
    /// in flight. A `record_bytes` of 0 counts as 1.
    ///
    /// ```
    /// use loaderx_core::SamplerMode;
    ///
    /// // ImageNet-sized JPEGs of about 110 kB: blocks of 38 records.
    /// assert_eq!(
    ///     SamplerMode::windowed(110_000),
    ///     SamplerMode::Windowed { block: 38, window: 16 }
    /// );
    /// ```
    pub fn windowed(record_bytes: u64) -> SamplerMode {
        let block = (WINDOWED_BLOCK_BYTES / record_bytes.max(1)).clamp(1, u64::from(u32::MAX));
        SamplerMode::Windowed {
            // Clamped to u32 above.
            block: block as u32,
            window: WINDOWED_WINDOW,
        }
    }

    /// True for the modes that draw a permutation of the records per pass
    /// and can resume at a [`RecordPosition`]: `Sequential`, `Cyclic` and
    /// `Windowed`.
    pub(crate) fn has_positions(self) -> bool {
        matches!(
            self,
            SamplerMode::Sequential
                | SamplerMode::Cyclic
                | SamplerMode::Windowed { .. }
                | SamplerMode::PartWindowed { .. }
        )
    }

    /// True for the modes that need record lengths.
    pub fn needs_lengths(self) -> bool {
        matches!(
            self,
            SamplerMode::Bucketed { .. } | SamplerMode::TokenBudget { .. }
        )
    }
}

impl std::str::FromStr for SamplerMode {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "sequential" => Ok(SamplerMode::Sequential),
            "iid" => Ok(SamplerMode::Iid),
            "cyclic" => Ok(SamplerMode::Cyclic),
            "bucketed" => Ok(SamplerMode::Bucketed {
                window: DEFAULT_WINDOW,
            }),
            _ => {
                let bad = || {
                    Error::invalid(format!(
                        "unknown sampler mode {s:?}; expected sequential, iid, cyclic, \
                         bucketed[:WINDOW], token_budget:MAX_TOKENS[:BUCKETS] or \
                         windowed:BLOCK[:WINDOW] or part_windowed[:WINDOW]"
                    ))
                };
                let mut parts = s.split(':');
                let (name, a, b) = (parts.next(), parts.next(), parts.next());
                if parts.next().is_some() {
                    return Err(bad());
                }
                match (name, a, b) {
                    (Some("bucketed"), Some(w), None) => Ok(SamplerMode::Bucketed {
                        window: w.parse().map_err(|_| bad())?,
                    }),
                    (Some("token_budget"), Some(t), b) => Ok(SamplerMode::TokenBudget {
                        max_tokens: t.parse().map_err(|_| bad())?,
                        buckets: b
                            .map_or(Ok(DEFAULT_BUCKETS), str::parse)
                            .map_err(|_| bad())?,
                    }),
                    (Some("windowed"), Some(block), window) => Ok(SamplerMode::Windowed {
                        block: block.parse().map_err(|_| bad())?,
                        window: window
                            .map_or(Ok(WINDOWED_WINDOW), str::parse)
                            .map_err(|_| bad())?,
                    }),
                    (Some("part_windowed"), window, None) => Ok(SamplerMode::PartWindowed {
                        window: window
                            .map_or(Ok(WINDOWED_WINDOW), str::parse)
                            .map_err(|_| bad())?,
                    }),
                    _ => Err(bad()),
                }
            }
        }
    }
}

/// Configures a [`Sampler`]; from [`Sampler::builder`].
#[derive(Debug, Clone)]
#[must_use]
pub struct SamplerBuilder {
    // Crate-visible: `DataLoaderBuilder` keeps its sampling settings in one
    // of these and sets the record count from its streams.
    pub(crate) len: u64,
    pub(crate) batch_size: usize,
    pub(crate) mode: SamplerMode,
    seed: u64,
    pub(crate) rank: usize,
    pub(crate) world_size: usize,
    pub(crate) drop_last: bool,
    pub(crate) lengths: Option<LengthIndex>,
    pub(crate) resume: Option<RecordPosition>,
    pub(crate) mixture: Option<Arc<Mixture>>,
    pub(crate) parts: Option<Arc<[u64]>>,
}

impl SamplerBuilder {
    /// The sampling mode (default `Cyclic`).
    pub fn mode(mut self, mode: SamplerMode) -> Self {
        self.mode = mode;
        self
    }

    /// The seed (default 42).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Draw only rank `rank`'s share of every step (default rank 0 of 1);
    /// see the [`Sampler` docs](Sampler#multi-host-sharding).
    pub fn shard(mut self, rank: usize, world_size: usize) -> Self {
        self.rank = rank;
        self.world_size = world_size;
        self
    }

    /// `true` (the default): every batch is full. `false`: every record once
    /// per pass, the last batch of a pass possibly partial; see the
    /// [`Sampler` docs](Sampler#passes-epochs-and-the-last-batch).
    pub fn drop_last(mut self, drop_last: bool) -> Self {
        self.drop_last = drop_last;
        self
    }

    /// Record lengths, for [`SamplerMode::Bucketed`] and
    /// [`SamplerMode::TokenBudget`] (ignored by the other modes); one per
    /// record.
    pub fn lengths(mut self, lengths: LengthIndex) -> Self {
        self.lengths = Some(lengths);
        self
    }

    /// Draw through `mixture`: the records are its sources' (laid end to
    /// end, so `len` must be its [`total`](Mixture::total)), position `t`
    /// of the run taking the record the mixture allocates it, and a pass is
    /// the mixture's [`pass_len`](Mixture::pass_len) positions. The mode
    /// must be `Sequential` or `Cyclic` (each source's own mode is the
    /// mixture's). See the [`Sampler` docs](Sampler#weighted-mixtures).
    pub fn mixture(mut self, mixture: Mixture) -> Self {
        self.mixture = Some(Arc::new(mixture));
        self
    }

    /// The parts of the records, for [`SamplerMode::PartWindowed`]
    /// (ignored by the other modes): each part's first record, then the
    /// total (what [`Store::part_starts`](crate::Store::part_starts) and
    /// [`Dataset::part_starts`](crate::Dataset::part_starts) return).
    pub fn parts(mut self, starts: impl Into<Vec<u64>>) -> Self {
        self.parts = Some(starts.into().into());
        self
    }

    /// Continue a run from `position` (what its sampler's
    /// [`position`](Sampler::position) reported at the step it stopped),
    /// with this builder's batch size and world size, which may differ
    /// from the run's: step 0 is the first batch after `position`. See the
    /// [`Sampler` docs](Sampler#resuming-at-a-record-position).
    pub fn resume(mut self, position: RecordPosition) -> Self {
        self.resume = Some(position);
        self
    }

    /// The sampler, at step 0.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for
    /// zero records, a zero batch size, `rank >= world_size`, `drop_last(false)`
    /// with `Iid`, fewer records than ranks with `drop_last(false)`, or, with
    /// `drop_last(true)` in `Sequential`, `Cyclic` and `Windowed` mode, fewer
    /// records than one global batch of `batch_size * world_size`; a
    /// `Windowed` block or window of 0; for the length-aware
    /// modes, no or mismatched lengths, a zero window, budget or bucket
    /// count, a record longer than the token budget, or fewer token-budget
    /// batches per pass than ranks; a [`resume`](Self::resume) position in
    /// a mode other than `Sequential`, `Cyclic` and `Windowed`, past the end of its
    /// pass, or, with `drop_last(false)` on several ranks whose whole
    /// passes give every rank the same number of steps, one whose rest of
    /// the pass would not (its last step holding fewer records than ranks).
    pub fn build(self) -> Result<Sampler, Error> {
        if self.world_size == 0 || self.rank >= self.world_size {
            return Err(Error::invalid(format!(
                "rank {} must be below world_size {} (at least 1)",
                self.rank, self.world_size
            )));
        }
        let lengths = if self.mode.needs_lengths() {
            let l = self.lengths.ok_or_else(|| {
                Error::invalid(format!(
                    "{:?} sampling needs the records' lengths (SamplerBuilder::lengths)",
                    self.mode
                ))
            })?;
            if l.len() as u64 != self.len {
                return Err(Error::invalid(format!(
                    "{} lengths given for {} records",
                    l.len(),
                    self.len
                )));
            }
            Some(l)
        } else {
            None
        };
        let mut pass_len = self.len;
        if let Some(m) = &self.mixture {
            if m.total() != self.len {
                return Err(Error::invalid(format!(
                    "the mixture's sources hold {} records, the sampler {}",
                    m.total(),
                    self.len
                )));
            }
            if !matches!(self.mode, SamplerMode::Sequential | SamplerMode::Cyclic) {
                return Err(Error::invalid(format!(
                    "{:?} sampling cannot draw through a mixture: its order is the \
                     mixture's allocation (each source's mode is the mixture's)",
                    self.mode
                )));
            }
            pass_len = m.pass_len();
        }
        let mut s = Sampler {
            len: pass_len,
            batch_size: self.batch_size,
            mode: self.mode,
            seed: self.seed,
            rank: self.rank as u64,
            world_size: self.world_size as u64,
            drop_last: self.drop_last,
            step: 0,
            buf: Vec::new(),
            lengths,
            plan: None,
            windows: Arc::default(),
            prefixes: Arc::default(),
            origin: self.resume,
            mix: self.mixture,
            parts: match self.mode {
                SamplerMode::PartWindowed { .. } => {
                    let starts = self.parts.ok_or_else(|| {
                        Error::invalid(
                            "part-windowed sampling needs the parts (SamplerBuilder::parts)",
                        )
                    })?;
                    let ok = starts.first() == Some(&0)
                        && starts.len() >= 2
                        && starts.windows(2).all(|w| w[0] <= w[1])
                        && starts.last() == Some(&self.len);
                    if !ok {
                        return Err(Error::invalid(format!(
                            "the parts must start at 0, never decrease and end at the {} \
                             records, got {} boundaries",
                            self.len,
                            starts.len()
                        )));
                    }
                    Some(Arc::new(PartOrders {
                        starts,
                        memo: Mutex::new(Vec::new()),
                    }))
                }
                _ => None,
            },
        };
        s.validate()?;
        if let (
            SamplerMode::TokenBudget {
                max_tokens,
                buckets,
            },
            Some(l),
        ) = (s.mode, &s.lengths)
        {
            let plan = bucket::TokenPlan::new(l, max_tokens, buckets, s.batch_size, s.drop_last)?;
            if plan.batches() < s.world_size {
                return Err(Error::invalid(format!(
                    "a budget of {max_tokens} tokens makes {} batches per pass, \
                     fewer than the {} ranks",
                    plan.batches(),
                    s.world_size
                )));
            }
            s.plan = Some(Arc::new(plan));
        }
        Ok(s)
    }
}

/// Draws batches of record indices.
///
/// Batch index sampling: every batch is a pure function of `(seed, step)`.
///
/// Three modes as in Python loaderx, a fourth for slow media, and two
/// length-aware ones ([below](#length-aware-modes)):
///
/// - [`SamplerMode::Sequential`]: records in order. With `drop_last(true)`
///   (the default) it is a sliding window over the circular index space, as
///   in Python loaderx: step `k` of a single rank reads `k*B .. k*B + B`
///   (mod `len`). With `drop_last(false)` every pass starts at record 0.
/// - [`SamplerMode::Iid`]: uniform with replacement, unbiased (Lemire's
///   multiply-shift with rejection), from a counter-based generator keyed by
///   `(seed, rank, step)`.
/// - [`SamplerMode::Cyclic`]: without replacement. Pass `p` is a fresh
///   pseudo-random permutation of `0..len` computed statelessly by a keyed
///   Feistel network with cycle-walking, so nothing of dataset size is ever
///   materialised and any step is O(batch) to compute.
/// - [`SamplerMode::Windowed`]: `Cyclic` passes in an order that reads
///   long runs of consecutive records, for drives and file systems that
///   cannot do fast random reads ([below](#windowed-order-for-slow-media)).
///
/// `seek(step)` is O(1): there is no state besides the step counter.
///
/// ## Passes (epochs) and the last batch
///
/// A pass visits the records of one permutation (`Cyclic`) or of the natural
/// order (`Sequential`) once, [`steps_per_epoch`](Sampler::steps_per_epoch)
/// steps long; step `k` belongs to pass `k / steps_per_epoch` (see
/// [`Sampler::epoch_of`]).
///
/// - `drop_last(true)` (the default): every batch is full; the
///   `len % (B * world_size)` positions left at the end of a pass are not
///   drawn, and because a `Cyclic` pass has a fresh permutation, which records
///   those are changes from pass to pass.
/// - `drop_last(false)`: every record is drawn **exactly once per pass**; the
///   last step of a pass may be shorter than `B` ([`Sampler::batch_len`]).
///   `Iid` has no passes and refuses it.
///
/// ## Multi-host sharding
///
/// [`SamplerBuilder::shard`] splits each step's global batch of
/// `B * world_size` positions of the pass into one block of `B` per rank, so
/// ranks are disjoint within a pass. With `drop_last(true)` every rank has the
/// same number of steps. With `drop_last(false)` the `rem < B * world_size`
/// positions left for the last step are split as evenly as possible: the
/// first `rem % world_size` ranks get `rem / world_size + 1`, the others
/// `rem / world_size`. A rank whose share is empty has one step fewer per
/// pass; a batch is never empty, and ranks differ by at most one step.
///
/// Worked example, `len = 10`, `B = 3`, `world_size = 2`, `Sequential`,
/// `drop_last(false)`: step 0 gives rank 0 positions `0 1 2` and rank 1
/// `3 4 5`; 4 positions are left, so step 1 gives rank 0 `6 7` and rank 1
/// `8 9`; step 2 starts the next pass. With `len = 7` the last step has one
/// position: rank 0 gets `6`, and rank 1's pass is one step long.
///
/// `Iid` gives each rank an independent stream.
///
/// ## Elastic resume
///
/// In `Sequential`, `Cyclic` and `Windowed` mode the global batch of a step — every
/// rank's batch, in rank order — depends on `batch_size × world_size`, not
/// on the two apart: it is the batch a single rank with that batch size
/// draws at that step. A run stopped at step `k` can therefore resume at
/// step `k` on another number of ranks (`batch_size` scaled so that the
/// global batch is unchanged, any number of workers) and deliver exactly
/// the global batches the uninterrupted run would have, step for step.
/// This holds with `drop_last(true)`, and with `drop_last(false)` when the
/// last step of a pass gives every rank at least one record (otherwise a
/// rank's pass is one step shorter and the ranks' steps no longer line
/// up). Placement views split each rank's batch further and keep the
/// property. `Iid` (an independent stream per rank) and the length-aware
/// modes (whole batches of the pass's shuffled list per rank) are not
/// elastic: resume them on the world size they started with.
/// (`loaderx-core/tests/elastic.rs` checks the property, and a run
/// resumed on 2, 4 and 3 ranks.)
///
/// ## Resuming at a record position
///
/// A run that changes its global batch size cannot resume at a step (step
/// `k` of another batch size is another place in the pass); it resumes at
/// the records it has drawn. [`Sampler::position`]`(k)` is where a run
/// stands before step `k`: the pass and how many of its records all ranks
/// together drew. A sampler built with [`SamplerBuilder::resume`] from that
/// position, with any batch size and world size, starts its step 0 at the
/// next record of the same pass order:
///
/// - `Cyclic`, `Windowed`, and `Sequential` with `drop_last(false)`: the
///   rest of the pass (its positions `records..len` of the same order) is cut
///   into batches of the new global size, the last one partial with
///   `drop_last(false)` — so every record the run had not drawn in that
///   pass comes exactly once and none it drew comes again; with
///   `drop_last(true)` fewer than one global batch of it is left out, as
///   at the end of any pass. Then whole passes follow, as an
///   uninterrupted run with the new batch size has them.
/// - `Sequential` with `drop_last(true)` (the sliding window): the window
///   slides on from the next record.
///
/// With `drop_last(false)` on several ranks, a resume position is refused
/// when the rest of its pass ends in a step of fewer records than ranks
/// while the whole passes do not: a rank with no share of that step would
/// take one step fewer than the others, and ranks that step in lockstep
/// would wait for it forever. Another global batch size (or, for fewer
/// records left than ranks, fewer ranks) resumes from it.
///
/// [`epoch_of`](Sampler::epoch_of) then counts the passes of the original
/// run, and the steps of the first one from the resume point;
/// [`position`](Sampler::position) of a resumed sampler is again a position
/// in the same order, so a run can change its batch size any number of
/// times. `Iid` (no passes) and the length-aware modes (whole batches of a
/// shuffled list) refuse a resume position.
///
/// ```
/// use loaderx_core::{Sampler, SamplerMode};
///
/// // 100 records, batches of 8, stopped before step 5: 40 records drawn.
/// let run = Sampler::builder(100, 8).drop_last(false).build()?;
/// let at = run.position(5);
/// assert_eq!((at.epoch, at.records), (0, 40));
/// // Resumed with batches of 16 on 2 ranks (a global batch of 32).
/// let ranks: Vec<Sampler> = (0..2)
///     .map(|r| Sampler::builder(100, 16).drop_last(false).shard(r, 2).resume(at).build())
///     .collect::<Result<_, _>>()?;
/// let mut seen: Vec<u64> = (0..5).flat_map(|k| run.indices(k)).collect();
/// for step in 0..ranks[0].steps_per_epoch() {
///     if ranks[0].epoch_of(step).0 > 0 {
///         break;
///     }
///     seen.extend(ranks.iter().flat_map(|s| s.indices(step)));
/// }
/// seen.sort();
/// assert_eq!(seen, (0..100).collect::<Vec<u64>>()); // the pass, each record once
/// # Ok::<(), loaderx_core::Error>(())
/// ```
///
/// ## Windowed order for slow media
///
/// A `Cyclic` pass reads the store in a uniformly random order: every
/// record is a random read, which a spinning disk or a network file system
/// serves hundreds of times slower than a sequential one, and which a
/// drive's read-ahead turns into far more bytes read than delivered.
/// [`SamplerMode::Windowed`]`{ block, window }` keeps every property of
/// `Cyclic` but the order inside a pass:
///
/// - the records are cut into blocks of `block` consecutive records (the
///   last one short when `block` does not divide the records), and a keyed
///   permutation, fresh every pass, orders the blocks;
/// - the blocks in that order are grouped into windows of `window`, and
///   the records of each window are shuffled by a permutation of their
///   own, also fresh every pass;
/// - the pass's positions run through the windows in turn.
///
/// So a run of consecutive steps reads `window` blocks, each from start to
/// end, and a batch draws from about `window` places in the store instead
/// of `B`. It is still a permutation per pass computed statelessly (any
/// step O(batch)), so everything above holds as for `Cyclic`: each record
/// exactly once per pass with `drop_last(false)`, passes differ, resume at
/// a step or a [record position](#resuming-at-a-record-position), ranks
/// take disjoint, contiguous shares of each global batch (all reading the
/// same window), and the global batch does not depend on the world size
/// ([elastic](#elastic-resume)). A block or window of 0 is refused; either
/// larger than the records is one shuffle of everything.
///
/// Choosing the sizes: `block × record size` of about 1–8 MiB (a read the
/// drive serves at its sequential speed; [`SamplerMode::windowed`] picks
/// 4 MiB from the record size), `window` of about 8–64 blocks (the batch
/// draws from that many places; `window × block × record size` bytes are
/// being read at once and should fit the page cache or the block cache
/// comfortably). What it costs in randomness, measured by [`OrderStats`],
/// is in the [sampler guide](crate::guide::sampler#slow-media-the-windowed-order):
/// records travel as far as in a full shuffle, but two records of one batch
/// come from the same block about once in `window` pairs.
///
/// ```
/// use std::collections::HashSet;
/// use loaderx_core::{Sampler, SamplerMode};
///
/// // 4 KB records: blocks of 1024 (4 MiB), windows of 16 blocks.
/// let mode = SamplerMode::windowed(4096);
/// assert_eq!(mode, SamplerMode::Windowed { block: 1024, window: 16 });
/// let s = Sampler::builder(1 << 16, 256).mode(mode).drop_last(false).build()?;
/// let blocks: HashSet<u64> = s.indices(0).iter().map(|&i| i / 1024).collect();
/// assert!(blocks.len() <= 16); // one window's blocks
/// // A pass is still a permutation, cut into the same steps as Cyclic's.
/// let mut pass: Vec<u64> = (0..s.steps_per_epoch()).flat_map(|k| s.indices(k)).collect();
/// pass.sort_unstable();
/// assert!(pass.iter().copied().eq(0..1 << 16));
/// # Ok::<(), loaderx_core::Error>(())
/// ```
///
/// ## Weighted mixtures
///
/// With [`SamplerBuilder::mixture`] the records are several sources laid
/// end to end (a [`Mixture`]), and position `t` of the run — step `k`'s
/// positions are `k × B × world_size …`, split across ranks as usual —
/// draws the record the mixture allocates to `t`: which source is a fixed,
/// periodic low-discrepancy order (after any `t` positions a source of
/// weight `p` has drawn `floor(t·p)` or `ceil(t·p)` records, so any window
/// of positions holds within two records of its share, and every batch
/// within two of `B·p`), and which of its records is the next of that
/// source's own pass order (a fresh permutation per pass for `Cyclic`
/// sources). Nothing is random about the composition, and nothing is
/// state: resume (at a step, or at a [record
/// position](#resuming-at-a-record-position)), sharding and elastic resume
/// hold exactly as for `Sequential` passes, of the mixture's
/// [`pass_len`](Mixture::pass_len) positions ([`MixtureStop`]). Every
/// source's passes go on across the mixture's passes.
///
/// ```
/// use loaderx_core::{Mixture, MixtureStop, Sampler, SamplerMode};
///
/// // Two sources: 0..100 (weight 3) and 100..150 (weight 1).
/// let mix = Mixture::new(&[(100, 3.0), (50, 1.0)], &[SamplerMode::Cyclic; 2], MixtureStop::FirstExhausted)?;
/// let s = Sampler::builder(150, 8).mixture(mix).seed(1).build()?;
/// let batch = s.indices(0);
/// assert_eq!(batch.iter().filter(|&&i| i >= 100).count(), 2); // a quarter
/// assert_eq!(s.pass_len(), 133); // until the first source is used up
/// # Ok::<(), loaderx_core::Error>(())
/// ```
///
/// ## Length-aware modes
///
/// For Ragged sequence stores, two modes form batches of records of
/// similar length, so that padding a batch to its longest record wastes
/// little. Both need the records' lengths
/// ([`SamplerBuilder::lengths`], a [`LengthIndex`]; a loader takes them
/// from its Ragged stream) and stay pure functions of `(seed, step)`:
///
/// - [`SamplerMode::Bucketed`]`{ window: k }`: a `Cyclic` pass (same
///   permutation, same steps, same `batch_len`s), but the pass's positions
///   are cut into windows of `k × B` records, each window is sorted by
///   length and cut into batches of `B`, and the order of all the pass's
///   batches is shuffled by a second keyed permutation. Every record once
///   per pass (with `drop_last(false)`; with `drop_last(true)` the
///   positions `Cyclic` drops are dropped); ranks take disjoint batches of
///   the shuffled order. The last, partial step of a `drop_last(false)`
///   pass is `Cyclic`'s. A step costs `k × B` permutation lookups and a
///   sort.
/// - [`SamplerMode::TokenBudget`]`{ max_tokens, buckets }`: batches of as
///   many records as fit `max_tokens` tokens after padding, at most
///   `batch_size`. The records, sorted by length, are cut into `buckets`
///   buckets of equal record counts; bucket `b` makes batches of
///   `min(batch_size, max_tokens / longest_b)` records, from a fresh
///   permutation of the bucket every pass, and the order of the pass's
///   batches is shuffled. The number of batches per pass, `T`, depends on
///   the lengths only — so `steps_per_epoch`, `epoch_of` and resume at any
///   step are as for the other modes, with no state. Step `s` of a pass
///   gives rank `r` batch `s × world_size + r` of the shuffled order:
///   `T / world_size` steps per pass with `drop_last(true)` (each bucket's
///   partial batch and the last `T % world_size` batches are not drawn),
///   and with `drop_last(false)` every record once, ranks below
///   `T % world_size` taking one step more. [`Sampler::batch_len`] varies
///   from step to step.
///
/// ```
/// use loaderx_core::{Sampler, SamplerMode};
/// use loaderx_core::sequence::LengthIndex;
///
/// let lengths = LengthIndex::from_lengths((0..1000u32).map(|i| 16 + i * 7 % 497).collect::<Vec<_>>())?;
/// let s = Sampler::builder(1000, 100)
///     .mode(SamplerMode::TokenBudget { max_tokens: 4096, buckets: 8 })
///     .lengths(lengths.clone())
///     .drop_last(false)
///     .build()?;
/// let mut seen = vec![0; 1000];
/// for step in 0..s.steps_per_epoch() {
///     let batch = s.indices(step);
///     let longest = batch.iter().map(|&i| lengths.lengths()[i as usize]).max().unwrap();
///     assert!(batch.len() as u32 * longest <= 4096); // fits the budget padded
///     batch.iter().for_each(|&i| seen[i as usize] += 1);
/// }
/// assert!(seen.iter().all(|&n| n == 1)); // every record once per pass
/// # Ok::<(), loaderx_core::Error>(())
/// ```
///
/// ```
/// use loaderx_core::{Sampler, SamplerMode};
///
/// let mut s = Sampler::new(1000, 32, SamplerMode::Cyclic, 7)?;
/// let first = s.next_batch().to_vec();
/// s.seek(0);
/// assert_eq!(s.next_batch(), &first[..]); // pure function of (seed, step)
/// assert_eq!(s.steps_per_epoch(), 31);    // 1000 / 32, remainder dropped
///
/// // An evaluation pass: every record once, the last batch partial.
/// let eval = Sampler::builder(1000, 32)
///     .mode(SamplerMode::Sequential)
///     .drop_last(false)
///     .build()?;
/// assert_eq!(eval.steps_per_epoch(), 32);
/// assert_eq!(eval.batch_len(31), 1000 - 31 * 32);
/// # Ok::<(), loaderx_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Sampler {
    len: u64,
    batch_size: usize,
    mode: SamplerMode,
    seed: u64,
    rank: u64,
    world_size: u64,
    drop_last: bool,
    step: u64,
    buf: Vec<u64>,
    lengths: Option<LengthIndex>,
    plan: Option<Arc<bucket::TokenPlan>>,
    /// Sorted `Bucketed` windows, shared by the sampler's clones.
    windows: Arc<bucket::WindowMemo>,
    /// `TokenBudget` passes' batch-length prefix sums, shared likewise.
    prefixes: Arc<bucket::PassPrefixes>,
    /// Where a resumed run's step 0 starts ([`SamplerBuilder::resume`]).
    origin: Option<RecordPosition>,
    /// The mixture drawn through ([`SamplerBuilder::mixture`]); `len` is
    /// then its pass length.
    mix: Option<Arc<Mixture>>,
    /// `PartWindowed`'s parts and its last pass's order.
    parts: Option<Arc<PartOrders>>,
}

/// The parts of a [`SamplerMode::PartWindowed`] sampler, and the order of
/// the pass drawn last (built once a pass, shared by the sampler's clones).
#[derive(Debug)]
struct PartOrders {
    starts: Arc<[u64]>,
    /// The two passes drawn last (the workers' and, across a pass's end,
    /// the look-ahead's).
    memo: Mutex<Vec<(u64, Arc<window::PartWindowedOrder>)>>,
}

impl PartOrders {
    fn order(&self, pass: u64, window: u32, key: u64) -> Arc<window::PartWindowedOrder> {
        let mut memo = self
            .memo
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((_, o)) = memo.iter().find(|(p, _)| *p == pass) {
            return Arc::clone(o);
        }
        // The first pass starts with part 0: a lazily converted dataset
        // has it converted already (its open read the schema from it).
        let o = Arc::new(window::PartWindowedOrder::new(
            Arc::clone(&self.starts),
            window,
            key,
            (pass == 0).then_some(0),
        ));
        if memo.len() >= 2 {
            memo.remove(0);
        }
        memo.push((pass, Arc::clone(&o)));
        o
    }
}

/// A point in a run's order of records: the pass, and how many of its
/// records every rank together has drawn. [`Sampler::position`] says where
/// a run stands before a step; [`SamplerBuilder::resume`] (or the loader's
/// [`resume`](crate::DataLoaderBuilder::resume)) continues from it with
/// another batch size or world size. See the
/// [`Sampler` docs](Sampler#resuming-at-a-record-position).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RecordPosition {
    /// The pass (epoch).
    pub epoch: u64,
    /// Records of the pass drawn before this point by all ranks together:
    /// the pass's positions `0..records`.
    pub records: u64,
}

impl std::fmt::Display for RecordPosition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "record {} of pass {}", self.records, self.epoch)
    }
}

/// Where a step's positions lie in its pass.
struct Slot {
    pass: u64,
    /// First position in the pass's order.
    base: u64,
    len: u64,
}

/// The pass of a step and where the step lies in it.
struct Placed {
    pass: u64,
    /// The step's index among this sampler's steps of the pass.
    s: u64,
    /// The first position of the pass this sampler draws (non-zero only in
    /// a resumed run's first pass).
    start: u64,
    /// Positions of the pass this sampler draws, from `start`.
    span: u64,
}

impl Sampler {
    /// A builder over `0..len` drawing `batch_size` indices per step, with the
    /// defaults: `Cyclic`, seed 42, rank 0 of 1, `drop_last(true)`.
    pub fn builder(len: u64, batch_size: usize) -> SamplerBuilder {
        SamplerBuilder {
            len,
            batch_size,
            mode: SamplerMode::Cyclic,
            seed: 42,
            rank: 0,
            world_size: 1,
            drop_last: true,
            lengths: None,
            resume: None,
            mixture: None,
            parts: None,
        }
    }

    /// A sampler over `0..len` drawing `batch_size` indices per step, every
    /// batch full; the [`builder`](Self::builder) has the other options.
    ///
    /// # Errors
    ///
    /// As [`SamplerBuilder::build`].
    pub fn new(
        len: u64,
        batch_size: usize,
        mode: SamplerMode,
        seed: u64,
    ) -> Result<Sampler, Error> {
        Sampler::builder(len, batch_size)
            .mode(mode)
            .seed(seed)
            .build()
    }

    /// This sampler restricted to rank `rank` of `world_size`; see the
    /// [`Sampler` docs](Sampler#multi-host-sharding).
    ///
    /// # Errors
    ///
    /// As [`SamplerBuilder::build`].
    pub fn shard(self, rank: usize, world_size: usize) -> Result<Sampler, Error> {
        let mut b = Sampler::builder(self.len(), self.batch_size)
            .mode(self.mode)
            .seed(self.seed)
            .drop_last(self.drop_last)
            .shard(rank, world_size);
        b.lengths = self.lengths;
        b.resume = self.origin;
        b.mixture = self.mix;
        b.build().map(|mut s| {
            s.step = self.step;
            s
        })
    }

    fn validate(&self) -> Result<(), Error> {
        if self.len == 0 {
            return Err(Error::invalid("cannot sample from zero records"));
        }
        if let Some(origin) = self.origin {
            if !self.mode.has_positions() {
                return Err(Error::invalid(format!(
                    "{:?} sampling cannot resume at a record position ({origin}): \
                     only Sequential, Cyclic and Windowed passes have one; resume it with \
                     start_step on the batch size and world size it started with",
                    self.mode
                )));
            }
            if origin.records > self.len {
                return Err(Error::invalid(format!(
                    "cannot resume at {origin}: a pass has {} records",
                    self.len
                )));
            }
        }
        if self.batch_size == 0 {
            return Err(Error::invalid("batch_size must be at least 1"));
        }
        if self.mode == (SamplerMode::Bucketed { window: 0 }) {
            return Err(Error::invalid(
                "bucketed sampling needs a window of at least 1 batch",
            ));
        }
        if self.mode == (SamplerMode::PartWindowed { window: 0 }) {
            return Err(Error::invalid(
                "part-windowed sampling needs windows of at least 1 part",
            ));
        }
        if let SamplerMode::Windowed { block, window } = self.mode
            && (block == 0 || window == 0)
        {
            return Err(Error::invalid(format!(
                "windowed sampling needs blocks of at least 1 record and windows of at \
                 least 1 block, got block {block} and window {window}"
            )));
        }
        if !self.drop_last {
            if self.mode == SamplerMode::Iid {
                return Err(Error::invalid(
                    "drop_last(false) needs passes over the data; Iid sampling has none",
                ));
            }
            if self.world_size > self.len {
                return Err(Error::invalid(format!(
                    "{} records cannot give each of {} ranks a batch",
                    self.len, self.world_size
                )));
            }
            self.check_resumed_lockstep()?;
            return Ok(());
        }
        let global = (self.batch_size as u64).checked_mul(self.world_size);
        let whole_batches = !matches!(
            self.mode,
            SamplerMode::Iid | SamplerMode::TokenBudget { .. }
        );
        if whole_batches && global.is_none_or(|g| g > self.len) {
            return Err(Error::invalid(format!(
                "{:?} sampling of full batches of {} over {} ranks needs at least {} records, \
                 got {} (drop_last(false) allows a partial batch)",
                self.mode,
                self.batch_size,
                self.world_size,
                self.batch_size as u128 * self.world_size as u128,
                self.len
            )));
        }
        Ok(())
    }

    /// With `drop_last(false)` on several ranks, refuses a resume position
    /// whose rest of the pass ends in a step of fewer records than ranks
    /// (some rank then has no share of it, and one step fewer than the
    /// others) when the whole passes give every rank the same number of
    /// steps: ranks stepping in lockstep would wait forever for the short
    /// one. A configuration whose whole passes already differ by a step is
    /// the documented behaviour, and its resume is not refused.
    fn check_resumed_lockstep(&self) -> Result<(), Error> {
        let Some(origin) = self.origin else {
            return Ok(());
        };
        if self.world_size < 2 {
            return Ok(());
        }
        let global = self.global();
        let short = |span: u64| {
            let rem = span as u128 % global;
            rem != 0 && rem < u128::from(self.world_size)
        };
        let span = self.len - origin.records;
        if short(span) && !short(self.len) {
            let rem = span as u128 % global;
            return Err(Error::invalid(format!(
                "cannot resume at {origin} on {} ranks with batches of {}: the {span}                  records left of the pass end in a step of {rem}, fewer than the ranks,                  so ranks {rem}..{} would take one step fewer than the others and ranks                  in lockstep would wait for them forever; resume with a global batch                  (batch_size × world_size) that leaves none or at least {} records for                  that step",
                self.world_size, self.batch_size, self.world_size, self.world_size
            )));
        }
        Ok(())
    }

    /// Number of records sampled from (a mixture's sources' together).
    pub fn len(&self) -> u64 {
        self.mix.as_ref().map_or(self.len, |m| m.total())
    }

    /// Records per pass: [`len`](Self::len), or a mixture's
    /// [`pass_len`](Mixture::pass_len).
    pub fn pass_len(&self) -> u64 {
        self.len
    }

    /// The mixture drawn through, if any.
    pub fn mixture(&self) -> Option<&Mixture> {
        self.mix.as_deref()
    }

    /// Always false: a sampler has at least one record.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Indices per full batch.
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// The mode.
    pub fn mode(&self) -> SamplerMode {
        self.mode
    }

    /// The record lengths of a length-aware mode.
    pub fn lengths(&self) -> Option<&LengthIndex> {
        self.lengths.as_ref()
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// `(rank, world_size)`.
    pub fn rank(&self) -> (usize, usize) {
        (self.rank as usize, self.world_size as usize)
    }

    /// Whether every batch is full (see the [`Sampler` docs](Sampler#passes-epochs-and-the-last-batch)).
    pub fn drop_last(&self) -> bool {
        self.drop_last
    }

    /// The step the next [`next_batch`](Self::next_batch) draws.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// Moves to `step`, in O(1).
    pub fn seek(&mut self, step: u64) {
        self.step = step;
    }

    /// Global batch: positions one step takes from a pass over all ranks.
    fn global(&self) -> u128 {
        self.batch_size as u128 * self.world_size as u128
    }

    /// This rank's share of the positions left for the last step of a pass
    /// of `span` positions.
    fn last_share(&self, span: u64) -> (u64, u64) {
        let rem = (span as u128 % self.global()) as u64;
        let (each, extra) = (rem / self.world_size, rem % self.world_size);
        let len = each + u64::from(self.rank < extra);
        let offset = self.rank * each + self.rank.min(extra);
        (offset, len)
    }

    /// Steps in one pass for this rank (at least 1).
    ///
    /// - `drop_last(true)`: `len / (batch_size * world_size)`;
    /// - `drop_last(false)`: that, plus one when this rank has a share of
    ///   the remainder;
    /// - `Iid`: `ceil(len / (batch_size * world_size))`, the steps that draw
    ///   as many records as a pass holds;
    /// - `TokenBudget`: `T / world_size` for `T` batches per pass, plus one
    ///   for the first `T % world_size` ranks with `drop_last(false)`.
    pub fn steps_per_epoch(&self) -> u64 {
        let g = self.global();
        let full = (self.len as u128 / g) as u64;
        if let Some(plan) = &self.plan {
            let t = plan.batches();
            let extra = !self.drop_last && self.rank < t % self.world_size;
            return (t / self.world_size + u64::from(extra)).max(1);
        }
        match (self.mode, self.drop_last) {
            (SamplerMode::Iid, _) => (self.len as u128).div_ceil(g) as u64,
            (_, true) => full.max(1),
            (_, false) => full + u64::from(self.last_share(self.len).1 > 0),
        }
    }

    /// Steps this rank takes from the `len - records` positions a resumed
    /// run's first pass has left (0 when none or too few for a full batch
    /// with `drop_last(true)`); 0 unless the pass is split (a resumed
    /// `Cyclic` or `drop_last(false)` `Sequential` run).
    pub(crate) fn partial_steps(&self) -> u64 {
        let Some(origin) = self.origin.filter(|_| !self.slides()) else {
            return 0;
        };
        let span = self.len - origin.records;
        let full = (span as u128 / self.global()) as u64;
        if self.drop_last {
            full
        } else {
            full + u64::from(self.last_share(span).1 > 0)
        }
    }

    /// True for the circular sliding window (`Sequential`, `drop_last(true)`),
    /// whose steps do not restart at a pass's first record.
    fn slides(&self) -> bool {
        self.mode == SamplerMode::Sequential && self.drop_last && self.mix.is_none()
    }

    /// The pass of `step` and where it lies in it.
    fn placed(&self, step: u64) -> Placed {
        let spe = self.steps_per_epoch();
        let whole = |first: u64, step: u64| Placed {
            pass: first.saturating_add(step / spe),
            s: step % spe,
            start: 0,
            span: self.len,
        };
        match self.origin {
            None => whole(0, step),
            // The window slides on from the resume point: its passes are
            // counted from there.
            Some(o) if self.slides() => whole(o.epoch, step),
            Some(o) => {
                let partial = self.partial_steps();
                if step < partial {
                    Placed {
                        pass: o.epoch,
                        s: step,
                        start: o.records,
                        span: self.len - o.records,
                    }
                } else {
                    whole(o.epoch.saturating_add(1), step - partial)
                }
            }
        }
    }

    /// `(epoch, step_in_epoch)` of `step`. In a [resumed](SamplerBuilder::resume)
    /// run the epochs are the passes of the run it resumes, and the steps
    /// of the pass it resumed in are counted from the resume point.
    pub fn epoch_of(&self, step: u64) -> (u64, u64) {
        let p = self.placed(step);
        (p.pass, p.s)
    }

    /// Step `step_in_epoch` of pass `epoch`, counted from step 0: the
    /// inverse of [`epoch_of`](Self::epoch_of); `None` past step `u64::MAX`,
    /// and in a [resumed](SamplerBuilder::resume) run for a pass before
    /// the one it resumed in.
    pub fn step_at(&self, epoch: u64, step_in_epoch: u64) -> Option<u64> {
        let spe = self.steps_per_epoch();
        let (first, partial) = match self.origin {
            None => (0, None),
            Some(o) if self.slides() => (o.epoch, None),
            Some(o) => (o.epoch, Some(self.partial_steps())),
        };
        let after = epoch.checked_sub(first)?;
        match partial {
            Some(_) if after == 0 => Some(step_in_epoch),
            Some(p) => (after - 1)
                .checked_mul(spe)?
                .checked_add(p)?
                .checked_add(step_in_epoch),
            None => after.checked_mul(spe)?.checked_add(step_in_epoch),
        }
    }

    /// The first step of pass `epoch`: [`step_at(epoch, 0)`](Self::step_at),
    /// or step 0 for a pass before the one a resumed run starts in;
    /// `None` past step `u64::MAX`.
    pub fn first_step_of(&self, epoch: u64) -> Option<u64> {
        match self.origin {
            Some(o) if epoch <= o.epoch => Some(0),
            _ => self.step_at(epoch, 0),
        }
    }

    /// Where the run stands before `step`: its pass and the records of the
    /// pass all ranks together drew in the steps before (with
    /// `Sequential` and `drop_last(true)`, the records the sliding window
    /// passed over, counted in passes of `len`). What a run stopping at
    /// `step` saves, to [`resume`](SamplerBuilder::resume) with another
    /// batch size or world size. Defined for `Sequential`, `Cyclic` and
    /// `Windowed`;
    /// for the other modes it is the pass and the records of the steps
    /// before `step` in it, which cannot be resumed from.
    pub fn position(&self, step: u64) -> RecordPosition {
        let global = self.global();
        if self.slides() {
            let o = self.origin.unwrap_or_default();
            let total =
                o.epoch as u128 * self.len as u128 + o.records as u128 + step as u128 * global;
            return RecordPosition {
                epoch: u64::try_from(total / self.len as u128).unwrap_or(u64::MAX),
                records: (total % self.len as u128) as u64,
            };
        }
        let p = self.placed(step);
        let drawn = (p.s as u128 * global).min(p.span as u128) as u64;
        RecordPosition {
            epoch: p.pass,
            records: p.start + drawn,
        }
    }

    /// The position a [resumed](SamplerBuilder::resume) sampler started
    /// from; `None` for one that starts at the first record.
    pub fn resumed_from(&self) -> Option<RecordPosition> {
        self.origin
    }

    /// Records the steps `steps` draw together: the sum of their
    /// [`batch_len`](Self::batch_len)s, saturating at `u64::MAX`. O(1) for
    /// every mode but `TokenBudget`, whose batch lengths vary from step to
    /// step: there the lengths of a pass are summed once into prefix sums
    /// (memoised for the most recent passes), so a range within a pass is
    /// a lookup, and whole passes between its ends cost O(1) each on a
    /// single rank (every pass draws the same records) and O(steps per
    /// pass) each when sharded (a rank's share of a pass varies).
    pub fn records_in(&self, steps: std::ops::Range<u64>) -> u64 {
        if steps.is_empty() {
            return 0;
        }
        if let Some(plan) = &self.plan {
            return self.token_records_in(plan, steps);
        }
        let b = self.batch_size as u128;
        let full = (steps.end - steps.start) as u128 * b;
        if self.mode == SamplerMode::Iid {
            return u64::try_from(full).unwrap_or(u64::MAX);
        }
        // Only the last step of a pass can be short. A resumed run's first
        // pass (steps `0..partial`) has its own last step; the whole passes
        // after it are counted from step `partial`.
        let partial = self.partial_steps();
        let mut short_steps = 0u128;
        if partial > 0 && steps.start < partial && partial <= steps.end {
            short_steps += b - self.batch_len(partial - 1) as u128;
        }
        let (start, end) = (
            steps.start.max(partial) - partial,
            steps.end.max(partial) - partial,
        );
        if start < end {
            // The steps `k` with `(k + 1) % spe == 0`, one per multiple of
            // `spe` in `start+1..=end`.
            let spe = self.steps_per_epoch();
            let lasts = (end / spe - start / spe) as u128;
            short_steps += lasts * (b - self.batch_len(partial + spe - 1) as u128);
        }
        u64::try_from(full - short_steps).unwrap_or(u64::MAX)
    }

    /// The first step `k` at or after `from` such that steps `from..k` draw at
    /// least `position` records ([`records_in`](Self::records_in)): the step
    /// whose batch starts at record `position` of those drawn from step `from`
    /// on, or, when that record lies inside a batch, the step after it. Where
    /// an adapter cuts a pass at a record position into whole batches.
    /// Saturates at `u64::MAX`. A binary search; with `TokenBudget`, one in
    /// the pass's prefix sums, whole passes skipped as in `records_in`.
    pub fn step_at_record(&self, from: u64, position: u64) -> u64 {
        if let Some(plan) = &self.plan {
            return self.token_step_at_record(plan, from, position);
        }
        // Every step draws between 1 and `batch_size` records, so the step
        // lies between these bounds; `records_in` grows with the end step.
        let mut lo = from.saturating_add(position.div_ceil(self.batch_size as u64));
        let mut hi = from.saturating_add(position);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.records_in(from..mid) >= position {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        lo
    }

    /// Prefix sums of the batch lengths of `TokenBudget` pass `pass`: entry
    /// `s` is the records its steps `0..s` draw, `steps_per_epoch + 1`
    /// entries.
    fn pass_prefix(&self, plan: &bucket::TokenPlan, pass: u64) -> Arc<[u64]> {
        self.prefixes.get_or_build(pass, || {
            let spe = self.steps_per_epoch();
            let mut sums = Vec::with_capacity(spe as usize + 1);
            let mut n = 0u64;
            sums.push(n);
            self.for_each_token_len(plan, pass, |len| {
                n += len;
                sums.push(n);
            });
            sums
        })
    }

    /// Calls `f` with the batch length of every step of `TokenBudget` pass
    /// `pass`, in order.
    fn for_each_token_len(&self, plan: &bucket::TokenPlan, pass: u64, mut f: impl FnMut(u64)) {
        let order = bucket::batch_order(self.seed, pass, plan.batches());
        for s in 0..self.steps_per_epoch() {
            // Below `batches()`: steps_per_epoch only counts slots of the pass.
            let g = order.apply(s * self.world_size + self.rank).unwrap_or(0);
            f(plan.batch_len(g));
        }
    }

    /// Records a whole `TokenBudget` pass draws for this rank.
    fn token_pass_total(&self, plan: &bucket::TokenPlan, pass: u64) -> u64 {
        if self.world_size == 1 {
            // The pass's steps take every batch of the plan once.
            return plan.records();
        }
        let mut n = 0u64;
        self.for_each_token_len(plan, pass, |len| n += len);
        n
    }

    fn token_records_in(&self, plan: &bucket::TokenPlan, steps: std::ops::Range<u64>) -> u64 {
        let spe = self.steps_per_epoch();
        let (p0, s0) = (steps.start / spe, (steps.start % spe) as usize);
        let (p1, s1) = (steps.end / spe, (steps.end % spe) as usize);
        let first = self.pass_prefix(plan, p0);
        if p0 == p1 {
            return first[s1] - first[s0];
        }
        let mut n = first[spe as usize] - first[s0];
        if s1 > 0 {
            n = n.saturating_add(self.pass_prefix(plan, p1)[s1]);
        }
        let middle = p1 - p0 - 1;
        if self.world_size == 1 {
            return n.saturating_add(plan.records().saturating_mul(middle));
        }
        for pass in p0 + 1..p1 {
            if n == u64::MAX {
                break;
            }
            n = n.saturating_add(self.token_pass_total(plan, pass));
        }
        n
    }

    fn token_step_at_record(&self, plan: &bucket::TokenPlan, from: u64, position: u64) -> u64 {
        if position == 0 {
            return from;
        }
        let spe = self.steps_per_epoch();
        let (mut pass, s) = (from / spe, (from % spe) as usize);
        // Within the pass of `from`.
        let sums = self.pass_prefix(plan, pass);
        let before = sums[s];
        let left = sums[spe as usize] - before;
        if position <= left {
            let k = sums[s..].partition_point(|&x| x - before < position);
            return from.saturating_add(k as u64);
        }
        // Whole passes after it: `base` is the first step of `pass`.
        let mut want = position - left;
        let Some(mut base) = (from - s as u64).checked_add(spe) else {
            return u64::MAX;
        };
        pass += 1;
        if self.world_size == 1 {
            let skip = (want - 1) / plan.records();
            want -= skip * plan.records();
            let Some(b) = skip.checked_mul(spe).and_then(|d| base.checked_add(d)) else {
                return u64::MAX;
            };
            (base, pass) = (b, pass + skip);
        } else {
            loop {
                let total = self.token_pass_total(plan, pass);
                if want <= total {
                    break;
                }
                want -= total;
                let Some(b) = base.checked_add(spe) else {
                    return u64::MAX;
                };
                (base, pass) = (b, pass + 1);
            }
        }
        // Within the pass where the position lies.
        let sums = self.pass_prefix(plan, pass);
        base.saturating_add(sums.partition_point(|&x| x < want) as u64)
    }

    fn slot(&self, step: u64) -> Slot {
        let b = self.batch_size as u128;
        let Placed {
            pass,
            s,
            start,
            span,
        } = self.placed(step);
        let full = span as u128 / self.global();
        // Every base below is under `start + span <= len`: s * global +
        // rank * b < full * global <= span, and the last share ends at span.
        if (s as u128) < full || self.drop_last {
            Slot {
                pass,
                base: start + (s as u128 * self.global() + self.rank as u128 * b) as u64,
                len: self.batch_size as u64,
            }
        } else {
            let (offset, len) = self.last_share(span);
            Slot {
                pass,
                base: start + (full * self.global()) as u64 + offset,
                len,
            }
        }
    }

    /// Number of indices step `step` draws: `batch_size`, or fewer for the
    /// last step of a pass with `drop_last(false)`; never 0.
    pub fn batch_len(&self, step: u64) -> usize {
        if let Some(plan) = &self.plan {
            return plan.batch_len(self.token_batch(step).1) as usize;
        }
        match self.mode {
            SamplerMode::Iid => self.batch_size,
            _ => self.slot(step).len as usize,
        }
    }

    /// `(pass, batch)` of a `TokenBudget` step: the batch of the pass's
    /// list that the step's slot maps to through the shuffled order.
    fn token_batch(&self, step: u64) -> (u64, u64) {
        let (pass, s) = self.epoch_of(step);
        let t = self.plan.as_ref().map_or(1, |p| p.batches());
        let slot = s * self.world_size + self.rank;
        let g = bucket::batch_order(self.seed, pass, t).apply(slot);
        // slot < t: steps_per_epoch only counts slots of the pass.
        debug_assert!(g.is_some());
        (pass, g.unwrap_or(0))
    }

    /// The `Cyclic` batch of `step`.
    fn fill_cyclic(&self, step: u64, out: &mut [u64]) -> Result<(), Error> {
        let slot = self.slot(step);
        let perm = FeistelPermutation::new(self.len, rng::mix(self.seed, slot.pass));
        for (j, o) in out.iter_mut().enumerate() {
            // Below base + len <= len of the store, by construction.
            let position = slot.base + j as u64;
            *o = perm.apply(position).ok_or_else(|| {
                Error::invalid(format!(
                    "cyclic position {position} outside 0..{}",
                    self.len
                ))
            })?;
        }
        Ok(())
    }

    /// Writes the batch of `step` into `out`, which must be exactly
    /// [`batch_len(step)`](Self::batch_len) long. Pure: the same
    /// `(seed, rank, world_size, drop_last, step)` always gives the same
    /// indices.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) when
    /// `out` is not `batch_len(step)` long (a longer slice would address
    /// positions past the end of a pass).
    pub fn fill(&self, step: u64, out: &mut [u64]) -> Result<(), Error> {
        let want = self.batch_len(step);
        if out.len() != want {
            return Err(Error::invalid(format!(
                "sampler output has room for {} indices, step {step} draws {want} \
                 (the batch size is {})",
                out.len(),
                self.batch_size
            )));
        }
        if let Some(m) = &self.mix {
            // Positions of the run, through the mixture's allocation.
            let slot = self.slot(step);
            let first = u128::from(slot.pass) * u128::from(self.len) + u128::from(slot.base);
            let mut cache = m.cache();
            for (j, o) in out.iter_mut().enumerate() {
                *o = m.index_at(first + j as u128, self.seed, &mut cache).1;
            }
            return Ok(());
        }
        match self.mode {
            SamplerMode::Sequential if self.drop_last => {
                // Global window of B*W positions starting at step*B*W (mod len).
                let b = self.batch_size as u128;
                let from = self.origin.map_or(0, |o| o.records as u128);
                let start = (from + step as u128 * self.global() + self.rank as u128 * b)
                    % self.len as u128;
                for (j, o) in out.iter_mut().enumerate() {
                    *o = ((start + j as u128) % self.len as u128) as u64;
                }
            }
            SamplerMode::Sequential => {
                let slot = self.slot(step);
                for (j, o) in out.iter_mut().enumerate() {
                    *o = slot.base + j as u64;
                }
            }
            SamplerMode::Iid => {
                let mut g = rng::SplitMix64::keyed(self.seed, self.rank, step);
                for o in out.iter_mut() {
                    *o = g.below(self.len);
                }
            }
            SamplerMode::Cyclic => self.fill_cyclic(step, out)?,
            SamplerMode::Windowed { block, window } => {
                let slot = self.slot(step);
                window::WindowedOrder::new(self.len, block, window, rng::mix(self.seed, slot.pass))
                    .fill(slot.base, out)?;
            }
            SamplerMode::PartWindowed { window } => {
                let slot = self.slot(step);
                let parts = self
                    .parts
                    .as_ref()
                    .ok_or_else(|| Error::invalid("part-windowed sampling without parts"))?;
                parts
                    .order(slot.pass, window, rng::mix(self.seed, slot.pass))
                    .fill(slot.base, out)?;
            }
            SamplerMode::TokenBudget { .. } => {
                let (pass, g) = self.token_batch(step);
                if let Some(plan) = &self.plan {
                    plan.fill(self.seed, pass, g, out)?;
                }
            }
            SamplerMode::Bucketed { window } => {
                let (pass, s) = self.epoch_of(step);
                let full = (self.len as u128 / self.global()) as u64;
                match &self.lengths {
                    Some(lengths) if s < full => {
                        let batches = full * self.world_size;
                        let b = self.batch_size as u64;
                        bucket::bucketed_fill(
                            &self.windows,
                            pass,
                            &FeistelPermutation::new(self.len, rng::mix(self.seed, pass)),
                            &bucket::batch_order(self.seed, pass, batches),
                            lengths,
                            batches * b,
                            (b, u64::from(window)),
                            s * self.world_size + self.rank,
                            out,
                        )?;
                    }
                    _ => self.fill_cyclic(step, out)?,
                }
            }
        }
        Ok(())
    }

    /// The batch of `step`, in a new vector.
    pub fn indices(&self, step: u64) -> Vec<u64> {
        let mut out = vec![0; self.batch_len(step)];
        // `out` is batch_len long, the one thing `fill` checks.
        let filled = self.fill(step, &mut out);
        debug_assert!(filled.is_ok());
        out
    }

    /// Draws the batch of the current step and advances by one. The slice is
    /// reused by the next call. The step counter wraps from `u64::MAX` to 0.
    pub fn next_batch(&mut self) -> &[u64] {
        let mut buf = std::mem::take(&mut self.buf);
        buf.resize(self.batch_len(self.step), 0);
        // `buf` is batch_len long, the one thing `fill` checks.
        let filled = self.fill(self.step, &mut buf);
        debug_assert!(filled.is_ok());
        self.buf = buf;
        self.step = self.step.wrapping_add(1);
        &self.buf
    }
}

impl Iterator for Sampler {
    type Item = Vec<u64>;

    /// Endless: always `Some`.
    fn next(&mut self) -> Option<Vec<u64>> {
        Some(self.next_batch().to_vec())
    }
}

#[cfg(test)]
mod tests;
