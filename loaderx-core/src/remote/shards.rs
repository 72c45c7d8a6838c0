//! The payload shards of a remote store: records to coalesced ranged
//! requests, fetched concurrently through the block cache, decoded into the
//! caller's buffer.

#[allow(clippy::wildcard_imports)]
use super::*;

#[derive(Default)]
pub(super) struct Counters {
    pub(super) requests: AtomicU64,
    pub(super) bytes: AtomicU64,
    pub(super) memory_hits: AtomicU64,
    pub(super) disk_hits: AtomicU64,
    pub(super) misses: AtomicU64,
}

pub(super) struct Inner {
    pub(super) target: Target,
    pub(super) tails: Vec<u64>,
    /// Each shard's ETag and version as `open` found them: a read whose
    /// response names another is refused (the shard was re-written since,
    /// and its bytes would be served, and cached, under this identity).
    pub(super) validators: Vec<(Option<String>, Option<String>)>,
    pub(super) cache: Option<BlockCache>,
    pub(super) opts: RemoteOptions,
    pub(super) stats: Counters,
}

/// The payload shards of a remote store, with their block cache.
#[derive(Clone)]
pub(super) struct RemoteShards {
    pub(super) inner: Arc<Inner>,
}

/// Stored bytes fetched for one gather.
pub(super) enum Fetched {
    /// Contiguous pieces of the shards, `(shard, start, bytes)`, sorted by
    /// shard and start, disjoint: what the general path assembles.
    Pieces(Vec<(usize, u64, Bytes)>),
    /// Every block the gather touches, each from the resident tier (the
    /// memory tier, or the directory's maps; no copy),
    /// by [`block_key`]; each record that straddles blocks has a piece of
    /// its own in `stitched`, `(shard, start, bytes)` sorted by shard,
    /// start and length (pieces of different records may overlap).
    Blocks {
        /// How offsets map to blocks.
        geometry: Geometry,
        /// The blocks, by [`block_key`].
        blocks: HashMap<u64, Bytes, FastKeys>,
        /// The straddling records' stored bytes.
        stitched: Vec<(usize, u64, Bytes)>,
    },
}

/// The `len` bytes at `offset` of shard `s` from `pieces`, sorted by shard
/// and start, if the last piece starting at or before `offset` holds them.
pub(super) fn pieces_get(
    pieces: &[(usize, u64, Bytes)],
    s: usize,
    offset: u64,
    len: u32,
) -> Option<&[u8]> {
    let k = pieces
        .partition_point(|p| (p.0, p.1) <= (s, offset))
        .checked_sub(1)?;
    let (ps, start, bytes) = &pieces[k];
    if *ps != s {
        return None;
    }
    // Same shard and sorted: `start <= offset`.
    let at = usize::try_from(offset - start).ok()?;
    bytes.get(at..at.checked_add(len as usize)?)
}

impl StagedBytes for Fetched {
    fn get(&self, s: usize, offset: u64, len: u32) -> Option<&[u8]> {
        match self {
            Fetched::Pieces(pieces) => pieces_get(pieces, s, offset, len),
            Fetched::Blocks {
                geometry,
                blocks,
                stitched,
            } => {
                let (b, at) = geometry.split(offset);
                blocks
                    .get(&block_key(s, b))
                    .and_then(|block| block.get(at..at.checked_add(len as usize)?))
                    .or_else(|| pieces_get(stitched, s, offset, len))
            }
        }
    }
}

/// A block fetched: `((shard, block), bytes)`.
pub(super) type FetchedBlock = ((usize, u64), Bytes);

/// A coalesced run of wanted bytes of one shard.
pub(super) struct Segment {
    pub(super) shard: usize,
    pub(super) start: u64,
    pub(super) end: u64,
    /// The first record it holds, for error messages.
    pub(super) record: u64,
}

impl ShardSource for RemoteShards {
    fn stats(&self) -> RemoteStats {
        let c = &self.inner.stats;
        RemoteStats {
            requests: c.requests.load(Ordering::Relaxed),
            bytes_fetched: c.bytes.load(Ordering::Relaxed),
            memory_hits: c.memory_hits.load(Ordering::Relaxed),
            disk_hits: c.disk_hits.load(Ordering::Relaxed),
            misses: c.misses.load(Ordering::Relaxed),
        }
    }

    /// Coalesces the wanted ranges into requests (through the block cache
    /// when there is one) and fetches them concurrently; with every block
    /// in the memory tier, hands out the blocks themselves.
    fn fetch(&self, mut wanted: Vec<Wanted>) -> Result<Box<dyn StagedBytes>, Error> {
        let inner = &*self.inner;
        let o = &inner.opts;
        // Warm: every block in the memory tier. The blocks themselves are
        // what was fetched; no ranges, no copies but of straddling records.
        if let Some(d) = inner.cache.as_ref().and_then(|c| c.disk.as_ref()) {
            d.note_use();
        }
        if let Some(cache) = &inner.cache
            && let Some((fetched, hits)) = cache.resident(&wanted)
        {
            self.count_memory_hits(hits);
            return Ok(Box::new(fetched));
        }
        wanted.sort_unstable_by_key(|w| (w.1, w.2));
        // With a cache, requests are made of blocks: cap segments only then.
        let cap = match inner.cache {
            Some(_) => u64::MAX,
            None => o.max_request_bytes,
        };
        let mut segments: Vec<Segment> = Vec::new();
        let mut useful = 0u64;
        for &(record, shard, offset, len) in &wanted {
            let end = offset + u64::from(len);
            if let Some(seg) = segments.last_mut()
                && seg.shard == shard
            {
                if offset <= seg.end {
                    // Overlapping or adjacent (aliased records share bytes).
                    useful += end.saturating_sub(seg.end);
                    seg.end = seg.end.max(end);
                    continue;
                }
                let gap = offset - seg.end;
                let waste = (seg.end - seg.start) - useful;
                if gap <= o.gap_bytes
                    && waste + gap <= useful + u64::from(len)
                    && end - seg.start <= cap
                {
                    useful += u64::from(len);
                    seg.end = end;
                    continue;
                }
            }
            useful = u64::from(len);
            segments.push(Segment {
                shard,
                start: offset,
                end,
                record,
            });
        }
        let pieces = match &inner.cache {
            None => self.fetch_segments(&segments)?,
            Some(cache) => self.fetch_blocks(cache, &segments)?,
        };
        Ok(Box::new(Fetched::Pieces(pieces)))
    }

    /// Fetches the blocks of `wanted` that are neither cached nor being
    /// fetched, into the cache, at once; a block another gather or
    /// prefetch is fetching is left to it. Nothing without a cache.
    fn prefetch(&self, wanted: Vec<Wanted>) -> u64 {
        let inner = &*self.inner;
        let Some(cache) = &inner.cache else {
            return 0;
        };
        let bs = cache.geometry.bytes;
        let mut blocks: BTreeMap<(usize, u64), u64> = BTreeMap::new();
        for &(record, s, offset, len) in &wanted {
            let end = offset + u64::from(len).max(1);
            for b in offset / bs..end.div_ceil(bs) {
                blocks.entry((s, b)).or_insert(record);
            }
        }
        let missing: Vec<(usize, u64, u64)> = blocks
            .into_iter()
            .filter(|&((s, b), _)| !cache.contains(s, b))
            .map(|((s, b), r)| (s, b, r))
            .collect();
        let (claim, mine, _busy) = cache.claim(&missing);
        inner
            .stats
            .misses
            .fetch_add(mine.len() as u64, Ordering::Relaxed);
        let got = self.fetch_missing(cache, &mine);
        drop(claim);
        // An error is the gather's to meet again, naming its record.
        got.map_or(0, |blocks| blocks.iter().map(|(_, b)| b.len() as u64).sum())
    }

    /// The memory tier read-locked, or without one the directory's mapped
    /// blocks; `None` without either.
    fn resident(&self, tick: Option<u64>) -> Option<Resident<'_>> {
        let cache = self.inner.cache.as_ref()?;
        if tick.is_none()
            && let Some(d) = &cache.disk
        {
            d.note_use();
        }
        let memory = cache.resident_tier()?.0.read().ok()?;
        Some(Resident::new(memory, tick, cache.geometry))
    }

    /// Counted as memory hits, or as disk hits when the resident tier is
    /// the directory's maps.
    fn count_memory_hits(&self, n: u64) {
        let stats = &self.inner.stats;
        let disk = self
            .inner
            .cache
            .as_ref()
            .and_then(BlockCache::resident_tier)
            .is_some_and(|t| t.1);
        let c = if disk {
            &stats.disk_hits
        } else {
            &stats.memory_hits
        };
        c.fetch_add(n, Ordering::Relaxed);
    }
}

impl RemoteShards {
    /// One request per segment.
    pub(super) fn fetch_segments(
        &self,
        segments: &[Segment],
    ) -> Result<Vec<(usize, u64, Bytes)>, Error> {
        let requests = segments
            .iter()
            .map(|s| (s.shard, s.start..s.end, s.record))
            .collect();
        self.get_ranges(requests)
    }

    /// Ranged GETs of `(shard, range, record)`, concurrently; each result
    /// has exactly the range's length.
    pub(super) fn get_ranges(
        &self,
        requests: Vec<(usize, std::ops::Range<u64>, u64)>,
    ) -> Result<Vec<(usize, u64, Bytes)>, Error> {
        if requests.is_empty() {
            return Ok(Vec::new());
        }
        let inner = &*self.inner;
        let t = &inner.target;
        let fut = futures::stream::iter(requests)
            .map(|(s, r, record)| async move {
                let name = format::data_file(s);
                let want = r.end - r.start;
                let start = r.start;
                let (e_tag, version) = &inner.validators[s];
                // At the version `open` saw (a server that ignores the
                // pin is caught by the comparison below).
                let options = GetOptions {
                    range: Some(r.into()),
                    ..pinned(e_tag.as_ref(), version.as_ref())
                };
                let got = t
                    .store
                    .get_opts(&t.object(&name), options)
                    .await
                    .map_err(|e| read_error(t, &name, Some(record), e))?;
                for (what, was, now) in [
                    ("ETag", e_tag, &got.meta.e_tag),
                    ("version", version, &got.meta.version),
                ] {
                    if let (Some(was), Some(now)) = (was, now)
                        && was != now
                    {
                        let what = format!("{what} {now}, was {was}");
                        return Err(changed(t, &name, Some(record), &what));
                    }
                }
                let b = got
                    .bytes()
                    .await
                    .map_err(|e| read_error(t, &name, Some(record), e))?;
                inner.stats.requests.fetch_add(1, Ordering::Relaxed);
                inner
                    .stats
                    .bytes
                    .fetch_add(b.len() as u64, Ordering::Relaxed);
                if b.len() as u64 != want {
                    return Err(t.err(
                        &name,
                        Some(record),
                        format!("a read of {want} bytes returned {}", b.len()),
                    ));
                }
                Ok::<_, Error>((s, start, b))
            })
            .buffer_unordered(inner.opts.concurrency)
            .try_collect::<Vec<_>>();
        let mut out = block_on(fut)??;
        out.sort_unstable_by_key(|p| (p.0, p.1));
        Ok(out)
    }

    /// Segments assembled from cache blocks, fetching the missing ones.
    pub(super) fn fetch_blocks(
        &self,
        cache: &BlockCache,
        segments: &[Segment],
    ) -> Result<Vec<(usize, u64, Bytes)>, Error> {
        let inner = &*self.inner;
        let bs = cache.geometry.bytes;
        let block_len = |s: usize, b: u64| bs.min(inner.tails[s] - b * bs);
        // Every block the segments touch, with a record for messages.
        let mut blocks: BTreeMap<(usize, u64), u64> = BTreeMap::new();
        for seg in segments {
            for b in seg.start / bs..seg.end.div_ceil(bs) {
                blocks.entry((seg.shard, b)).or_insert(seg.record);
            }
        }
        let mut have: HashMap<(usize, u64), Hit> = HashMap::with_capacity(blocks.len());
        let mut missing: Vec<(usize, u64, u64)> = Vec::new();
        let keys: Vec<(usize, u64, u64)> = blocks
            .keys()
            .map(|&(s, b)| (s, b, block_len(s, b)))
            .collect();
        for ((&(s, b), &record), hit) in blocks.iter().zip(cache.get_many(&keys)) {
            match hit {
                Some(hit) => {
                    let c = match hit {
                        Hit::Memory(_) => &inner.stats.memory_hits,
                        Hit::Disk(_) => &inner.stats.disk_hits,
                    };
                    c.fetch_add(1, Ordering::Relaxed);
                    have.insert((s, b), hit);
                }
                None => missing.push((s, b, record)),
            }
        }
        // Each missing block fetched once: those another gather or a
        // prefetch is fetching are waited for, then looked up again (and
        // fetched here only if that fetch failed).
        let mut todo = missing;
        while !todo.is_empty() {
            let (claim, mine, busy) = cache.claim(&todo);
            inner
                .stats
                .misses
                .fetch_add(mine.len() as u64, Ordering::Relaxed);
            for (key, block) in self.fetch_missing(cache, &mine)? {
                have.insert(key, Hit::Memory(block));
            }
            drop(claim);
            if busy.is_empty() {
                break;
            }
            cache.wait_for(&busy);
            let keys: Vec<(usize, u64, u64)> = busy
                .iter()
                .map(|&(s, b, _)| (s, b, block_len(s, b)))
                .collect();
            todo = Vec::new();
            for (&(s, b, record), hit) in busy.iter().zip(cache.get_many(&keys)) {
                match hit {
                    Some(hit) => {
                        let c = match hit {
                            Hit::Memory(_) => &inner.stats.memory_hits,
                            Hit::Disk(_) => &inner.stats.disk_hits,
                        };
                        c.fetch_add(1, Ordering::Relaxed);
                        have.insert((s, b), hit);
                    }
                    None => todo.push((s, b, record)),
                }
            }
        }
        let mut pieces = Vec::with_capacity(segments.len());
        for seg in segments {
            let (b0, b1) = (seg.start / bs, (seg.end - 1) / bs);
            let block = |b: u64| {
                have.get(&(seg.shard, b)).ok_or_else(|| {
                    let name = format::data_file(seg.shard);
                    inner.target.err(&name, Some(seg.record), "block missing")
                })
            };
            let piece = if b0 == b1 {
                let off = seg.start - b0 * bs;
                block(b0)?
                    .bytes()
                    .slice(off as usize..(off + seg.end - seg.start) as usize)
            } else {
                let mut buf = BytesMut::with_capacity((seg.end - seg.start) as usize);
                for b in b0..=b1 {
                    let len = block_len(seg.shard, b);
                    let lo = seg.start.max(b * bs) - b * bs;
                    let hi = seg.end.min(b * bs + len) - b * bs;
                    buf.extend_from_slice(&block(b)?.bytes()[lo as usize..hi as usize]);
                }
                buf.freeze()
            };
            pieces.push((seg.shard, seg.start, piece));
        }
        Ok(pieces)
    }

    /// Fetches the blocks `missing` (`(shard, block, record)`, sorted,
    /// claimed by the caller) into the cache, runs of consecutive blocks
    /// with one request each (capped); returns them.
    pub(super) fn fetch_missing(
        &self,
        cache: &BlockCache,
        missing: &[(usize, u64, u64)],
    ) -> Result<Vec<FetchedBlock>, Error> {
        let inner = &*self.inner;
        let bs = cache.geometry.bytes;
        let block_len = |s: usize, b: u64| bs.min(inner.tails[s] - b * bs);
        let mut out = Vec::with_capacity(missing.len());
        // Runs of consecutive missing blocks, one request each (capped).
        let per_request = (inner.opts.max_request_bytes / bs).max(1);
        let mut requests: Vec<(usize, std::ops::Range<u64>, u64)> = Vec::new();
        // (shard, first block, last block, record)
        let mut run: Option<(usize, u64, u64, u64)> = None;
        for &(s, b, record) in missing {
            if let Some((rs, first, last, _)) = &mut run
                && *rs == s
                && *last + 1 == b
                && b - *first < per_request
            {
                *last = b;
                continue;
            }
            if let Some((rs, first, last, rec)) = run.take() {
                requests.push((rs, first * bs..(last * bs + block_len(rs, last)), rec));
            }
            run = Some((s, b, b, record));
        }
        if let Some((rs, first, last, rec)) = run {
            requests.push((rs, first * bs..(last * bs + block_len(rs, last)), rec));
        }
        for (s, start, bytes) in self.get_ranges(requests)? {
            let mut at = 0u64;
            while at < bytes.len() as u64 {
                let b = (start + at) / bs;
                let len = block_len(s, b);
                let block = bytes.slice(at as usize..(at + len) as usize);
                cache.put(s, b, &block);
                out.push(((s, b), block));
                at += len;
            }
        }
        Ok(out)
    }
}
