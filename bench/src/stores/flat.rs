//! The physical limits: a parallel memcpy of the workload's bytes, and one
//! flat file (sequential write; mmap fancy-index gather, as NumPy does it).

use std::fs::File;
use std::io::Write;
use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use memmap2::Mmap;
use rayon::prelude::*;

use super::{Backend, Gathered, Result, Strided, allocated, offsets, output, split_records};
use crate::workload::Workload;

/// Gathers this small are copied on the calling thread.
const SERIAL_MAX_BYTES: usize = 256 << 10;

/// Copies the gathered records out of the in-memory source (on the calling
/// thread below 256 KiB, else over the thread pool the stores use): what
/// any gather costs at least.
pub struct Memcpy<'w> {
    w: &'w Workload,
}

impl<'w> Memcpy<'w> {
    /// Over `w`'s bytes.
    pub fn new(w: &'w Workload) -> Memcpy<'w> {
        Memcpy { w }
    }
}

impl Backend for Memcpy<'_> {
    fn name(&self) -> String {
        "memcpy (in memory, limit)".into()
    }

    fn write(&mut self, _: &Workload, _: &Path) -> Result<Duration> {
        Ok(Duration::ZERO)
    }

    fn disk_bytes(&self) -> u64 {
        0
    }

    fn gather(&self, idx: &[u64]) -> Result<Box<dyn Gathered + Send>> {
        let w = self.w;
        if w.dense.is_some() {
            return Ok(Box::new(dense_memcpy(w, idx)));
        }
        let offsets = offsets(w, idx);
        let total = offsets[idx.len()];
        // Fresh, never-zeroed memory, filled in parallel: the cheapest way
        // any gather can hand over its records.
        let mut buf: Vec<u8> = Vec::with_capacity(total);
        let parts = split_records(w, idx, &mut buf.spare_capacity_mut()[..total]);
        parts.into_par_iter().with_min_len(4).for_each(|(dst, i)| {
            dst.write_copy_of_slice(&w.flat[w.range(i)]);
        });
        // SAFETY: `parts` covered all `total` bytes of the reserved capacity,
        // each written by `write_copy_of_slice` above; `u8` has no invalid values.
        unsafe { buf.set_len(total) };
        Ok(output(w, (buf, offsets)))
    }
}

/// A Dense gather from memory: record `i` at `i * stride` (no offsets
/// looked up), copied in fixed-size moves for the small widths, on the
/// calling thread below [`SERIAL_MAX_BYTES`], else over the pool.
fn dense_memcpy(w: &Workload, idx: &[u64]) -> Strided {
    let stride = w.range(0).len();
    let total = idx.len() * stride;
    let mut buf: Vec<u8> = Vec::with_capacity(total);
    let spare = &mut buf.spare_capacity_mut()[..total];
    fn run<const N: usize>(flat: &[u8], stride: usize, idx: &[u64], out: &mut [MaybeUninit<u8>]) {
        let n = if N == 0 { stride } else { N };
        for (dst, &i) in out.chunks_exact_mut(n).zip(idx) {
            let at = i as usize * n;
            dst.write_copy_of_slice(&flat[at..at + n]);
        }
    }
    let copy = |idx: &[u64], out: &mut [MaybeUninit<u8>]| match stride {
        1 => run::<1>(&w.flat, stride, idx, out),
        2 => run::<2>(&w.flat, stride, idx, out),
        4 => run::<4>(&w.flat, stride, idx, out),
        8 => run::<8>(&w.flat, stride, idx, out),
        16 => run::<16>(&w.flat, stride, idx, out),
        _ => run::<0>(&w.flat, stride, idx, out),
    };
    if total < SERIAL_MAX_BYTES || stride == 0 {
        copy(idx, spare);
    } else {
        let per = idx.len().div_ceil(2 * rayon::current_num_threads()).max(1);
        spare
            .par_chunks_mut(per * stride)
            .zip(idx.par_chunks(per))
            .for_each(|(out, idx)| copy(idx, out));
    }
    // SAFETY: the chunks above cover all `total` bytes of the reserved
    // capacity (`idx.len()` records of `stride` bytes), each written by
    // `write_copy_of_slice`; `u8` has no invalid values.
    unsafe { buf.set_len(total) };
    Strided { buf, stride }
}

/// The workload as one flat file: written sequentially in 8 MiB pieces;
/// Dense gathers copy rows out of a memory map on the calling thread, as
/// NumPy's `mmap[idx]` fancy indexing does.
pub struct FlatFile<'w> {
    w: &'w Workload,
    path: PathBuf,
    map: Option<Mmap>,
}

impl<'w> FlatFile<'w> {
    /// For `w`.
    pub fn new(w: &'w Workload) -> FlatFile<'w> {
        FlatFile {
            w,
            path: PathBuf::new(),
            map: None,
        }
    }
}

impl Backend for FlatFile<'_> {
    fn name(&self) -> String {
        "flat file (write) / mmap fancy index (gather)".into()
    }

    fn write(&mut self, w: &Workload, dir: &Path) -> Result<Duration> {
        self.path = dir.join("flat.bin");
        let mut f = File::create(&self.path)?;
        let started = Instant::now();
        for piece in w.flat.chunks(8 << 20) {
            f.write_all(piece)?;
        }
        drop(f);
        let took = started.elapsed();
        let f = File::open(&self.path)?;
        // SAFETY: the file was just written by this process and nothing
        // modifies or truncates it while the map lives.
        self.map = Some(unsafe { Mmap::map(&f)? });
        Ok(took)
    }

    fn disk_bytes(&self) -> u64 {
        allocated(&self.path)
    }

    fn gather(&self, idx: &[u64]) -> Result<Box<dyn Gathered + Send>> {
        let map = self.map.as_ref().ok_or("gather before write")?;
        // Dense: the offset is the index times the stride, as NumPy computes it.
        let stride = self.w.range(0).len();
        let mut buf = Vec::with_capacity(idx.len() * stride);
        for &i in idx {
            let at = i as usize * stride;
            buf.extend_from_slice(map.get(at..at + stride).ok_or("index past the file")?);
        }
        Ok(Box::new(Strided { buf, stride }))
    }
}
