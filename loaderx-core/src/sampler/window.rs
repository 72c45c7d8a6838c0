//! The pass order of [`SamplerMode::Windowed`](super::SamplerMode::Windowed):
//! blocks of consecutive records in a random order, records shuffled
//! within windows of consecutive blocks of that order.
//!
//! Records `0..n` are cut into blocks of `block` (the last one short when
//! `block` does not divide `n`). A keyed permutation orders the blocks;
//! slots `j·window .. (j+1)·window` of that order are window `j`, and the
//! pass's positions run through the windows in turn, each window's
//! records (its blocks laid end to end in block order) shuffled by a
//! permutation of their own. Everything is O(1) memory and O(1) per
//! position, like `Cyclic`'s permutation.

use super::FeistelPermutation;
use super::rng::mix;
use crate::error::Error;

/// One pass's windowed order: a bijection from positions `0..n` of the
/// pass to records `0..n`.
#[derive(Debug, Clone)]
pub(crate) struct WindowedOrder {
    n: u64,
    /// Records per block, at most `n`.
    block: u64,
    /// Blocks per window, at most `blocks`.
    window: u64,
    blocks: u64,
    /// Slot of the block order → block.
    order: FeistelPermutation,
    /// The slot and shortfall (`block - its length`) of the last block when
    /// it is short.
    short: Option<(u64, u64)>,
    key: u64,
}

impl WindowedOrder {
    /// The order of `0..n` (n ≥ 1) for `key`, with `block` and `window`
    /// at least 1 (validated by the sampler).
    pub(crate) fn new(n: u64, block: u32, window: u32, key: u64) -> WindowedOrder {
        let block = u64::from(block.max(1)).min(n.max(1));
        let blocks = n.div_ceil(block).max(1);
        let window = u64::from(window.max(1)).min(blocks);
        let order = FeistelPermutation::new(blocks, mix(key, 0));
        let tail = n % block;
        let short = (tail != 0).then(|| {
            // The last block is in the domain, so the inverse exists.
            let slot = order.invert(blocks - 1).unwrap_or(blocks - 1);
            (slot, block - tail)
        });
        WindowedOrder {
            n,
            block,
            window,
            blocks,
            order,
            short,
            key,
        }
    }

    /// Records of a full window.
    fn full(&self) -> u128 {
        u128::from(self.window) * u128::from(self.block)
    }

    /// The window holding position `t < n`.
    fn window_of(&self, t: u64) -> u64 {
        let t = u128::from(t);
        match self.short {
            Some((slot, gap)) => {
                let j = u128::from(slot / self.window);
                // Windows up to the short block's start at multiples of a
                // full window; those after it `gap` records earlier.
                if t < (j + 1) * self.full() - u128::from(gap) {
                    (t / self.full()) as u64
                } else {
                    ((t + u128::from(gap)) / self.full()) as u64
                }
            }
            None => (t / self.full()) as u64,
        }
    }

    /// First position of window `j`.
    fn window_start(&self, j: u64) -> u64 {
        let start = u128::from(j) * self.full();
        let gap = match self.short {
            Some((slot, gap)) if slot / self.window < j => u128::from(gap),
            _ => 0,
        };
        // Below n: window j exists.
        (start - gap) as u64
    }

    /// Blocks of window `j`, and the short block's place among them.
    fn window_blocks(&self, j: u64) -> (u64, Option<(u64, u64)>) {
        let first = j * self.window;
        let count = self.window.min(self.blocks - first);
        let short = self
            .short
            .filter(|&(slot, _)| slot / self.window == j)
            .map(|(slot, gap)| (slot - first, gap));
        (count, short)
    }

    /// Records of window `j`.
    fn window_len(&self, j: u64) -> u64 {
        let (count, short) = self.window_blocks(j);
        // At most n: the windows tile the pass.
        (u128::from(count) * u128::from(self.block) - u128::from(short.map_or(0, |(_, gap)| gap)))
            as u64
    }

    /// The shuffle of window `j`'s records.
    fn shuffle(&self, j: u64) -> FeistelPermutation {
        FeistelPermutation::new(self.window_len(j), mix(mix(self.key, 1), j))
    }

    /// The record at offset `l` of window `j`'s blocks laid end to end.
    fn record_in(&self, j: u64, l: u64) -> Option<u64> {
        let (_, short) = self.window_blocks(j);
        let (l, size) = (u128::from(l), u128::from(self.block));
        let l = match short {
            // Past the short block: count it as full.
            Some((q, gap)) if l >= u128::from(q) * size + size - u128::from(gap) => {
                l + u128::from(gap)
            }
            _ => l,
        };
        // Both below the window's blocks and the block size.
        let (k, offset) = ((l / size) as u64, (l % size) as u64);
        let block = self.order.apply(j * self.window + k)?;
        Some(block * self.block + offset)
    }

    /// The records at positions `first .. first + out.len()` of the pass.
    pub(crate) fn fill(&self, first: u64, out: &mut [u64]) -> Result<(), Error> {
        let outside = |position: u64| {
            Error::invalid(format!(
                "windowed position {position} outside 0..{}",
                self.n
            ))
        };
        // The window of the previous position: (j, start, end, shuffle).
        let mut current: Option<(u64, u64, u64, FeistelPermutation)> = None;
        for (i, o) in out.iter_mut().enumerate() {
            let t = first
                .checked_add(i as u64)
                .filter(|&t| t < self.n)
                .ok_or_else(|| outside(first.saturating_add(i as u64)))?;
            if current.as_ref().is_none_or(|c| t >= c.2) {
                let j = self.window_of(t);
                let start = self.window_start(j);
                current = Some((j, start, start + self.window_len(j), self.shuffle(j)));
            }
            let Some((j, start, _, shuffle)) = &current else {
                return Err(outside(t));
            };
            let l = shuffle.apply(t - start).ok_or_else(|| outside(t))?;
            *o = self.record_in(*j, l).ok_or_else(|| outside(t))?;
        }
        Ok(())
    }

    /// The record at position `t` of the pass.
    #[cfg(test)]
    pub(crate) fn apply(&self, t: u64) -> Option<u64> {
        let mut out = [0];
        self.fill(t, &mut out).ok().map(|()| out[0])
    }

    /// The block of record `i`.
    #[cfg(test)]
    pub(crate) fn block_of(&self, i: u64) -> u64 {
        i / self.block
    }
}

/// One pass's windowed order over blocks of their own sizes (a dataset's
/// parts: a lazily converted parquet dataset's row groups), as
/// [`SamplerMode::PartWindowed`](super::SamplerMode::PartWindowed) draws
/// it: the blocks in a keyed random order, windows of consecutive blocks
/// of that order, each window's records shuffled. The windows ramp up:
/// 1, 2, 4, … blocks, then `window` each, so the pass's first batch needs
/// one block (a dataset read where it lives starts after one row group's
/// fetch, not `window`'s). With `first_block`, the block order is turned
/// so that it starts with that block (the first pass starts with part 0,
/// which opening a lazily converted dataset converts already). Built once
/// per pass (O(blocks)), then O(log blocks) per position.
#[derive(Debug)]
pub(crate) struct PartWindowedOrder {
    n: u64,
    /// Slot of the block order → block, turned by `turn` slots.
    order: FeistelPermutation,
    turn: u64,
    blocks: u64,
    /// Records before each slot of the block order, and the total.
    slot_start: Vec<u64>,
    /// Each window's first slot, and the number of blocks.
    window_slot: Vec<u64>,
    /// The blocks' first records, and the total.
    starts: std::sync::Arc<[u64]>,
    key: u64,
}

impl PartWindowedOrder {
    /// The order of the records of blocks `starts` (each block's first
    /// record, then the total: at least one block, non-decreasing, from 0)
    /// for `key`, `window` blocks a window (at least 1).
    pub(crate) fn new(
        starts: std::sync::Arc<[u64]>,
        window: u32,
        key: u64,
        first_block: Option<u64>,
    ) -> PartWindowedOrder {
        let blocks = starts.len().saturating_sub(1).max(1) as u64;
        let window = u64::from(window.max(1)).min(blocks);
        let order = FeistelPermutation::new(blocks, mix(key, 0));
        let turn = first_block.and_then(|b| order.invert(b)).unwrap_or(0);
        let block_at = |slot: u64| order.apply((slot + turn) % blocks).unwrap_or(slot);
        let mut slot_start = Vec::with_capacity(blocks as usize + 1);
        let mut at = 0u64;
        slot_start.push(0);
        for slot in 0..blocks {
            let b = block_at(slot) as usize;
            let size = match (starts.get(b), starts.get(b + 1)) {
                (Some(&lo), Some(&hi)) => hi.saturating_sub(lo),
                _ => 0,
            };
            at = at.saturating_add(size);
            slot_start.push(at);
        }
        let mut window_slot = vec![0u64];
        let mut size = 1u64;
        while let Some(&last) = window_slot.last()
            && last < blocks
        {
            window_slot.push((last + size).min(blocks));
            size = (size * 2).min(window);
        }
        PartWindowedOrder {
            n: at,
            order,
            turn,
            blocks,
            slot_start,
            window_slot,
            starts,
            key,
        }
    }

    /// Records of the pass.
    #[cfg(test)]
    pub(crate) fn len(&self) -> u64 {
        self.n
    }

    /// The window of position `t < n`, its first position and its length.
    fn window_at(&self, t: u64) -> (u64, u64, u64) {
        // The last slot starting at or before t (a slot of records).
        let slot = self
            .slot_start
            .partition_point(|&x| x <= t)
            .saturating_sub(1) as u64;
        let j = self
            .window_slot
            .partition_point(|&s| s <= slot)
            .saturating_sub(1);
        let (first, end) = (
            self.window_slot[j] as usize,
            self.window_slot[j + 1] as usize,
        );
        let start = self.slot_start[first];
        (j as u64, start, self.slot_start[end] - start)
    }

    /// The records at positions `first .. first + out.len()` of the pass.
    pub(crate) fn fill(&self, first: u64, out: &mut [u64]) -> Result<(), Error> {
        let outside = |position: u64| {
            Error::invalid(format!(
                "windowed position {position} outside 0..{}",
                self.n
            ))
        };
        let mut current: Option<(u64, u64, u64, FeistelPermutation)> = None;
        for (i, o) in out.iter_mut().enumerate() {
            let t = first
                .checked_add(i as u64)
                .filter(|&t| t < self.n)
                .ok_or_else(|| outside(first.saturating_add(i as u64)))?;
            if current.as_ref().is_none_or(|c| t >= c.1 + c.2) {
                let (j, start, len) = self.window_at(t);
                let shuffle = FeistelPermutation::new(len, mix(mix(self.key, 1), j));
                current = Some((j, start, len, shuffle));
            }
            let Some((_, start, _, shuffle)) = &current else {
                return Err(outside(t));
            };
            let at = start + shuffle.apply(t - start).ok_or_else(|| outside(t))?;
            let slot = self
                .slot_start
                .partition_point(|&x| x <= at)
                .saturating_sub(1);
            let block = self
                .order
                .apply((slot as u64 + self.turn) % self.blocks)
                .ok_or_else(|| outside(t))? as usize;
            *o = self.starts[block] + (at - self.slot_start[slot]);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_tile_the_pass() {
        for (n, block, window) in [(10, 3, 2), (9, 3, 2), (1, 5, 5), (100, 7, 3), (64, 8, 8)] {
            for key in 0..20 {
                let o = WindowedOrder::new(n, block, window, key);
                let mut t = 0;
                let mut j = 0;
                while t < n {
                    assert_eq!(o.window_start(j), t, "{n} {block} {window} {key}");
                    for u in t..t + o.window_len(j) {
                        assert_eq!(o.window_of(u), j);
                    }
                    t += o.window_len(j);
                    j += 1;
                }
                assert_eq!(t, n);
                assert_eq!(j, o.blocks.div_ceil(o.window));
            }
        }
    }

    #[test]
    fn a_window_reads_its_own_blocks_only() {
        let o = WindowedOrder::new(1000, 10, 4, 3);
        for j in 0..25 {
            let blocks: std::collections::BTreeSet<u64> = (0..o.window_len(j))
                .map(|u| o.block_of(o.apply(o.window_start(j) + u).unwrap()))
                .collect();
            assert_eq!(blocks.len(), 4);
        }
    }

    #[test]
    fn positions_past_the_pass_are_refused() {
        let o = WindowedOrder::new(10, 3, 2, 1);
        assert!(o.fill(9, &mut [0, 0]).is_err());
        assert!(o.fill(u64::MAX, &mut [0]).is_err());
        assert!(o.apply(9).is_some_and(|i| i < 10));
    }

    #[test]
    fn huge_blocks_and_windows_are_one_shuffle() {
        let o = WindowedOrder::new(u64::MAX, u32::MAX, u32::MAX, 5);
        assert!(o.apply(u64::MAX - 1).is_some());
        let o = WindowedOrder::new(7, u32::MAX, u32::MAX, 5);
        let mut all: Vec<u64> = (0..7).map(|t| o.apply(t).unwrap()).collect();
        all.sort_unstable();
        assert_eq!(all, (0..7).collect::<Vec<u64>>());
    }

    #[test]
    fn part_windows_are_permutations_of_their_own_blocks() {
        // Blocks of 5, 0, 3, 7, 1 and 9 records.
        let starts: std::sync::Arc<[u64]> = vec![0u64, 5, 5, 8, 15, 16, 25].into();
        for window in [1, 2, 3, 6, 10] {
            for key in 0..30 {
                let first = (key % 3 == 0).then_some(key % 6);
                let o = PartWindowedOrder::new(std::sync::Arc::clone(&starts), window, key, first);
                assert_eq!(o.len(), 25);
                let mut all = vec![0u64; 25];
                o.fill(0, &mut all).unwrap();
                // Filling from any position gives the same records.
                let mut tail = vec![0u64; 12];
                o.fill(13, &mut tail).unwrap();
                assert_eq!(tail, all[13..]);
                // Each window's positions hold exactly its blocks' records.
                let block_of = |r: u64| starts.partition_point(|&x| x <= r) - 1;
                let mut t = 0;
                while t < 25 {
                    let (_, start, len) = o.window_at(t);
                    assert_eq!(start, t);
                    let blocks: std::collections::BTreeSet<usize> = all
                        [t as usize..(t + len) as usize]
                        .iter()
                        .map(|&r| block_of(r))
                        .collect();
                    assert!(blocks.len() <= window as usize, "{blocks:?}");
                    // The windows ramp up from one block (here one of
                    // records, or an empty one and the next).
                    if t == 0 {
                        assert!(blocks.len() <= 2, "{blocks:?}");
                    }
                    t += len;
                }
                all.sort_unstable();
                assert_eq!(all, (0..25).collect::<Vec<u64>>());
                assert!(o.fill(24, &mut [0, 0]).is_err());
            }
        }
    }

    #[test]
    fn part_windows_ramp_up_from_one_block() {
        let starts: std::sync::Arc<[u64]> = (0..=40u64).map(|b| b * 10).collect::<Vec<_>>().into();
        for key in 0..10 {
            let o = PartWindowedOrder::new(std::sync::Arc::clone(&starts), 8, key, Some(key % 40));
            let mut all = vec![0u64; 400];
            o.fill(0, &mut all).unwrap();
            let mut sizes = Vec::new();
            let mut t = 0;
            while t < 400 {
                let (_, _, len) = o.window_at(t);
                sizes.push(len / 10);
                t += len;
            }
            // 1, 2, 4, then 8 blocks, the rest last.
            assert_eq!(sizes, [1, 2, 4, 8, 8, 8, 8, 1]);
            // The first ten positions are the first block's records.
            let first: std::collections::BTreeSet<u64> = all[..10].iter().map(|r| r / 10).collect();
            assert_eq!(first.into_iter().collect::<Vec<_>>(), [key % 40]);
        }
    }
}
