//! This crate's Zrecord stores.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use loaderx_core::{Codec, CreateOptions, DynDense, DynDenseWriter, DynRagged, DynRaggedWriter};

use super::{Backend, Gathered, Result, Strided, allocated};
use crate::workload::Workload;

/// A Zrecord Dense or Ragged store.
pub struct Zrecord {
    codec: Codec,
    sync: bool,
    dict: Option<Vec<u8>>,
    path: PathBuf,
    reader: Option<Reader>,
}

enum Reader {
    Dense(DynDense),
    Ragged(DynRagged),
}

struct RaggedOut(loaderx_core::DynRaggedBatch);

impl Gathered for RaggedOut {
    fn record(&self, k: usize) -> &[u8] {
        self.0.bytes(k)
    }
}

impl Zrecord {
    /// A contender writing with `codec` (and `dict` for `zstd_dict`),
    /// without syncing on close (as every contender: no fsync).
    pub fn new(codec: Codec, dict: Option<Vec<u8>>) -> Zrecord {
        Zrecord {
            codec,
            sync: false,
            dict,
            path: PathBuf::new(),
            reader: None,
        }
    }

    /// The library's default: `close` syncs every file before and after
    /// publishing the header.
    pub fn synced(mut self) -> Zrecord {
        self.sync = true;
        self
    }

    /// Where the store was written.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Backend for Zrecord {
    fn name(&self) -> String {
        if self.sync {
            format!(
                "loaderx-rs zrecord {}, synced close (the default)",
                self.codec
            )
        } else {
            format!("loaderx-rs zrecord {}", self.codec)
        }
    }

    fn write(&mut self, w: &Workload, dir: &Path) -> Result<Duration> {
        self.path = dir.join(format!("zrecord_{}", self.codec));
        let mut opts = CreateOptions::new(self.codec).sync_on_close(self.sync);
        if let Some(d) = &self.dict {
            opts = opts.dict_bytes(d.clone());
        }
        let took = match &w.dense {
            Some(shape) => {
                let mut wr = DynDenseWriter::create(&self.path, w.dtype, shape, &opts)?;
                let started = Instant::now();
                wr.append_bytes(&w.flat, w.len())?;
                wr.close()?;
                started.elapsed()
            }
            None => {
                let mut wr = DynRaggedWriter::create(&self.path, w.dtype, w.ndim, &opts)?;
                let started = Instant::now();
                wr.append_bytes((0..w.len()).map(|i| (w.shape(i), w.record(i))))?;
                wr.close()?;
                started.elapsed()
            }
        };
        self.reader = Some(match &w.dense {
            Some(_) => Reader::Dense(DynDense::open(&self.path)?),
            None => Reader::Ragged(DynRagged::open(&self.path)?),
        });
        Ok(took)
    }

    fn disk_bytes(&self) -> u64 {
        allocated(&self.path)
    }

    fn gather(&self, idx: &[u64]) -> Result<Box<dyn Gathered + Send>> {
        match &self.reader {
            Some(Reader::Dense(d)) => Ok(Box::new(Strided {
                buf: d.gather_bytes(idx)?,
                stride: d.record_bytes(),
            })),
            Some(Reader::Ragged(r)) => Ok(Box::new(RaggedOut(r.gather(idx)?))),
            None => Err("gather before write".into()),
        }
    }
}
