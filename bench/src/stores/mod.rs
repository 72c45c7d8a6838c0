//! The store contenders: each writes a workload and gathers IID batches
//! from what it wrote.

use std::path::Path;
use std::time::Duration;

use loaderx_core::Codec;

use crate::workload::Workload;

pub mod arrow;
pub mod codec_loop;
pub mod flat;
pub mod lmdb;
pub mod zrecord;

/// Any error of the suite.
pub type Error = Box<dyn std::error::Error + Send + Sync>;
/// The suite's result.
pub type Result<T> = std::result::Result<T, Error>;

/// A gathered batch: record `k` of the batch as bytes.
pub trait Gathered {
    /// Element bytes of the `k`-th gathered record.
    fn record(&self, k: usize) -> &[u8];

    /// Logical bytes of the whole output.
    fn bytes(&self) -> usize;
}

/// Dense output: one buffer of equal-sized records.
pub struct Strided {
    /// The bytes.
    pub buf: Vec<u8>,
    /// Bytes per record.
    pub stride: usize,
}

impl Gathered for Strided {
    fn record(&self, k: usize) -> &[u8] {
        &self.buf[k * self.stride..(k + 1) * self.stride]
    }

    fn bytes(&self) -> usize {
        self.buf.len()
    }
}

/// Ragged output: one buffer and each record's range.
pub struct Packed {
    /// The bytes.
    pub buf: Vec<u8>,
    /// `len + 1` offsets into `buf`.
    pub offsets: Vec<usize>,
}

impl Gathered for Packed {
    fn record(&self, k: usize) -> &[u8] {
        &self.buf[self.offsets[k]..self.offsets[k + 1]]
    }

    fn bytes(&self) -> usize {
        self.offsets.windows(2).map(|w| w[1] - w[0]).sum()
    }
}

/// One contender for one workload and codec.
pub trait Backend: Sync {
    /// Name in the tables, codec included.
    fn name(&self) -> String;
    /// Writes the workload under `dir`; returns the time from handing over
    /// the first record to the logical finalize (no fsync).
    fn write(&mut self, w: &Workload, dir: &Path) -> Result<Duration>;
    /// Allocated bytes on disk (0 for in-memory contenders).
    fn disk_bytes(&self) -> u64;
    /// Gathers `idx` into a fresh output.
    fn gather(&self, idx: &[u64]) -> Result<Box<dyn Gathered + Send>>;
}

/// Allocated bytes of every file under `path`.
pub fn allocated(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if meta.is_dir() {
        std::fs::read_dir(path)
            .map(|d| d.flatten().map(|e| allocated(&e.path())).sum())
            .unwrap_or(0)
    } else {
        meta.blocks() * 512
    }
}

/// Record `i` as a self-describing value for key-value and columnar peers:
/// Ragged records carry their dimensions first (little-endian u64), as a
/// Zrecord Ragged payload does; Dense records are their bytes.
pub fn value_of(w: &Workload, i: usize) -> Vec<u8> {
    if w.dense.is_some() {
        return w.record(i).to_vec();
    }
    let mut v = Vec::with_capacity(8 * w.ndim + w.range(i).len());
    for &d in w.shape(i) {
        v.extend_from_slice(&(d as u64).to_le_bytes());
    }
    v.extend_from_slice(w.record(i));
    v
}

/// The element bytes of a value made by [`value_of`].
pub fn elements_of<'a>(w: &Workload, value: &'a [u8]) -> &'a [u8] {
    if w.dense.is_some() {
        value
    } else {
        &value[(8 * w.ndim).min(value.len())..]
    }
}

/// A per-record zstd compressor or decompressor setting for `codec`.
pub fn zstd_level(codec: Codec) -> Option<i32> {
    match codec {
        Codec::Raw => None,
        _ => Some(3),
    }
}

/// Where each of `w`'s records at `idx` starts when packed back to back,
/// and (last) their total length.
pub fn offsets(w: &Workload, idx: &[u64]) -> Vec<usize> {
    let mut offsets = Vec::with_capacity(idx.len() + 1);
    offsets.push(0);
    for &i in idx {
        offsets.push(offsets[offsets.len() - 1] + w.range(i as usize).len());
    }
    offsets
}

/// Splits `buf` (at least the records' total length) into one destination
/// per record at `idx`, paired with the record's index.
pub fn split_records<'a, T>(
    w: &Workload,
    idx: &[u64],
    buf: &'a mut [T],
) -> Vec<(&'a mut [T], usize)> {
    let mut parts = Vec::with_capacity(idx.len());
    let mut rest = buf;
    for &i in idx {
        let (head, tail) = rest.split_at_mut(w.range(i as usize).len());
        parts.push((head, i as usize));
        rest = tail;
    }
    parts
}

/// A fresh buffer for `w`'s records at `idx`, filled in parallel by `fill`
/// (given per-thread state from `init`, a destination and a record index);
/// returns the buffer and each record's offset.
pub fn scatter<S>(
    w: &Workload,
    idx: &[u64],
    init: impl Fn() -> S + Send + Sync,
    fill: impl Fn(&mut S, &mut [u8], usize) -> Result<()> + Send + Sync,
) -> Result<(Vec<u8>, Vec<usize>)> {
    use rayon::prelude::*;
    let offsets = offsets(w, idx);
    let mut buf = vec![0u8; offsets[idx.len()]];
    let parts = split_records(w, idx, &mut buf);
    parts
        .into_par_iter()
        .with_min_len(4)
        .map_init(init, |s, (dst, i)| fill(s, dst, i))
        .collect::<Result<()>>()?;
    Ok((buf, offsets))
}

/// Wraps a scattered buffer as Dense or Ragged output.
pub fn output(w: &Workload, (buf, offsets): (Vec<u8>, Vec<usize>)) -> Box<dyn Gathered + Send> {
    match &w.dense {
        Some(_) => Box::new(Strided {
            stride: w.range(0).len(),
            buf,
        }),
        None => Box::new(Packed { buf, offsets }),
    }
}
