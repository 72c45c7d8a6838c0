//! The codec limit: the same zstd frames compressed and decompressed in a
//! bare loop over the same thread pool, no container around them.

use std::path::Path;
use std::time::{Duration, Instant};

use rayon::prelude::*;

use super::{Backend, Gathered, Result, output, scatter};
use crate::workload::Workload;

/// One zstd frame per record (level 3), with or without a dictionary.
pub struct ZstdLoop<'w> {
    w: &'w Workload,
    dict: Option<Vec<u8>>,
    frames: Vec<Vec<u8>>,
}

impl<'w> ZstdLoop<'w> {
    /// For `w`, with `dict` when the codec is `zstd_dict`.
    pub fn new(w: &'w Workload, dict: Option<Vec<u8>>) -> ZstdLoop<'w> {
        ZstdLoop {
            w,
            dict,
            frames: Vec::new(),
        }
    }
}

impl Backend for ZstdLoop<'_> {
    fn name(&self) -> String {
        match self.dict {
            Some(_) => "bare zstd_dict loop (codec limit)".into(),
            None => "bare zstd loop (codec limit)".into(),
        }
    }

    /// Compresses every record in parallel (the compress loop).
    fn write(&mut self, w: &Workload, _: &Path) -> Result<Duration> {
        let dict = self.dict.as_deref().unwrap_or(&[]);
        let started = Instant::now();
        let frames: std::io::Result<Vec<Vec<u8>>> = (0..w.len())
            .into_par_iter()
            .with_min_len(16)
            .map_init(
                || zstd::bulk::Compressor::with_dictionary(3, dict),
                |c, i| match c {
                    Ok(c) => c.compress(w.record(i)),
                    Err(e) => Err(std::io::Error::new(e.kind(), e.to_string())),
                },
            )
            .collect();
        self.frames = frames?;
        Ok(started.elapsed())
    }

    fn disk_bytes(&self) -> u64 {
        self.frames.iter().map(|f| f.len() as u64).sum()
    }

    fn gather(&self, idx: &[u64]) -> Result<Box<dyn Gathered + Send>> {
        let dict = self.dict.as_deref().unwrap_or(&[]);
        let out = scatter(
            self.w,
            idx,
            || zstd::bulk::Decompressor::with_dictionary(dict),
            |d, dst, i| {
                let d = d.as_mut().map_err(|e| e.to_string())?;
                if d.decompress_to_buffer(&self.frames[i], dst)? != dst.len() {
                    return Err("short frame".into());
                }
                Ok(())
            },
        )?;
        Ok(output(self.w, out))
    }
}
