//! LMDB through `heed`: one key (big-endian record index) per record, the
//! value raw or one zstd frame, committed in one write transaction, no sync.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use heed::types::Bytes;
use heed::{CommitOrAbort, Database, Env, EnvFlags, EnvOpenOptions, WithoutTls};
use loaderx_core::Codec;
use rayon::prelude::*;

use super::{Backend, Gathered, Result, allocated, elements_of, output, scatter, value_of};
use crate::workload::Workload;

/// Records handed to one write transaction between parallel compression rounds.
const CHUNK: usize = 4096;

/// An LMDB environment holding the workload.
pub struct Lmdb<'w> {
    w: &'w Workload,
    codec: Codec,
    dict: Option<Vec<u8>>,
    path: PathBuf,
    env: Option<Env<WithoutTls>>,
}

impl<'w> Lmdb<'w> {
    /// For `w` with `codec` (and `dict` for `zstd_dict`).
    pub fn new(w: &'w Workload, codec: Codec, dict: Option<Vec<u8>>) -> Lmdb<'w> {
        Lmdb {
            w,
            codec,
            dict,
            path: PathBuf::new(),
            env: None,
        }
    }
}

impl Backend for Lmdb<'_> {
    fn name(&self) -> String {
        format!("LMDB (heed) {}", self.codec)
    }

    fn write(&mut self, w: &Workload, dir: &Path) -> Result<Duration> {
        self.path = dir.join(format!("lmdb_{}", self.codec));
        std::fs::create_dir_all(&self.path)?;
        let mut options = EnvOpenOptions::new().read_txn_without_tls();
        options.map_size((w.bytes() * 2 + (1 << 30)).next_multiple_of(1 << 20));
        // SAFETY: NO_SYNC and NO_META_SYNC only drop durability (the
        // benchmark requests no fsync from any contender); nothing else
        // opens this fresh directory.
        let env = unsafe {
            options.flags(EnvFlags::NO_SYNC | EnvFlags::NO_META_SYNC);
            options.open(&self.path)?
        };
        let dict = self.dict.clone().unwrap_or_default();
        let level = super::zstd_level(self.codec);
        let started = Instant::now();
        let wtxn = env.write_txn()?;
        env.create_databases_and_commit(wtxn, |wdo, wtxn| -> Result<_> {
            let db: Database<'_, Bytes, Bytes> = wdo.create_database(wtxn, None)?;
            for start in (0..w.len()).step_by(CHUNK) {
                let end = w.len().min(start + CHUNK);
                let values: std::io::Result<Vec<Vec<u8>>> = (start..end)
                    .into_par_iter()
                    .with_min_len(16)
                    .map_init(
                        || level.map(|l| zstd::bulk::Compressor::with_dictionary(l, &dict)),
                        |c, i| match c {
                            None => Ok(value_of(w, i)),
                            Some(Ok(c)) => c.compress(&value_of(w, i)),
                            Some(Err(e)) => Err(std::io::Error::other(e.to_string())),
                        },
                    )
                    .collect();
                for (k, v) in values?.iter().enumerate() {
                    db.put(wtxn, &((start + k) as u64).to_be_bytes(), v)?;
                }
            }
            Ok(CommitOrAbort::<_, ()>::Commit(db))
        })?;
        let took = started.elapsed();
        self.env = Some(env);
        Ok(took)
    }

    fn disk_bytes(&self) -> u64 {
        allocated(&self.path)
    }

    fn gather(&self, idx: &[u64]) -> Result<Box<dyn Gathered + Send>> {
        let env = self.env.as_ref().ok_or("gather before write")?;
        // heed 0.23 ties a database handle to a borrow of its environment, so
        // each gather opens the unnamed database (one short read transaction).
        let rtxn = env.read_txn()?;
        let db: Database<'_, Bytes, Bytes> = env
            .open_databases_and_commit(rtxn, |dbo, rtxn| -> Result<_> {
                Ok(CommitOrAbort::<_, ()>::Commit(
                    dbo.open_database(rtxn, None)?,
                ))
            })?
            .unwrap_commit()
            .ok_or("the unnamed database is missing")?;
        let w = self.w;
        let dict = self.dict.as_deref().unwrap_or(&[]);
        let compressed = self.codec != Codec::Raw;
        let out = scatter(
            w,
            idx,
            || {
                let txn = env.read_txn();
                let dec = zstd::bulk::Decompressor::with_dictionary(dict);
                (txn, dec, Vec::new())
            },
            |(txn, dec, scratch), dst, i| {
                let txn = txn.as_ref().map_err(|e| e.to_string())?;
                let value = db
                    .get(txn, &(i as u64).to_be_bytes())?
                    .ok_or_else(|| format!("record {i} missing"))?;
                let value = if compressed {
                    let dec = dec.as_mut().map_err(|e| e.to_string())?;
                    scratch.clear();
                    scratch.reserve(dst.len() + 8 * w.ndim);
                    dec.decompress_to_buffer(value, scratch)?;
                    &scratch[..]
                } else {
                    value
                };
                dst.copy_from_slice(elements_of(w, value));
                Ok(())
            },
        )?;
        Ok(output(w, out))
    }
}
