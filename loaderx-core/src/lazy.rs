//! Datasets converted lazily, part by part, where their records live
//! elsewhere: the seam between the loader and a converter of remote files
//! (`loaderx-convert`'s parquet datasets on the Hub, a bucket or a web
//! server, opened with `loaderx_convert::lazy::open`).
//!
//! A [`PartSource`] knows how many records each of its parts holds before
//! any is converted (a parquet file's row groups, from its footer) and
//! converts one part into a directory of stores on request.
//! [`Dataset::lazy`](crate::Dataset::lazy) makes of it an ordinary
//! [`Dataset`](crate::Dataset): its streams are [`Store`](crate::Store)s
//! that the loader, a sampler and every gather use as any other; a part is
//! converted the first time a gather, or the loader's look-ahead (which
//! knows every future batch), needs it, into a cache directory bounded in
//! bytes ([`LazyOptions::cache_bytes`]; the parts least recently needed
//! are deleted first). Once every part is converted, the cache directory
//! is a multi-part dataset ([`Dataset::merge`](crate::Dataset::merge)
//! writes its manifest).
//!
//! ```
//! use std::path::Path;
//! use std::sync::Arc;
//! use loaderx_core::lazy::{LazyOptions, PartSource};
//! use loaderx_core::{Codec, Dataset, DenseWriter};
//!
//! /// Three parts of 4 records: record `i` holds `i`.
//! struct Counting;
//! impl PartSource for Counting {
//!     fn name(&self) -> &str {
//!         "counting"
//!     }
//!     fn part_records(&self) -> Vec<u64> {
//!         vec![4, 4, 4]
//!     }
//!     fn convert_part(
//!         &self,
//!         part: usize,
//!         dir: &Path,
//!     ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//!         let first = 4 * part as u64;
//!         let mut w = DenseWriter::<u64>::create(dir.join("x"), &[], Codec::Raw)?;
//!         w.append_slice(&(first..first + 4).collect::<Vec<_>>(), 4)?;
//!         w.close()?;
//!         Ok(())
//!     }
//! }
//!
//! let cache = tempfile::tempdir()?;
//! let dataset = Dataset::lazy(Arc::new(Counting), &LazyOptions::new(cache.path()))?;
//! let x = dataset.streams()[0].1.as_dense().unwrap();
//! assert_eq!(x.len(), 12);
//! let bytes = x.gather_bytes(&[11, 2, 5])?;
//! let got: Vec<u64> = bytes.chunks(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
//! assert_eq!(got, [11, 2, 5]);
//! // Parts 0 (opened), 2 and 1 were converted, 3 in all.
//! assert_eq!(dataset.lazy_stats().unwrap().converted, 3);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::path::{Path, PathBuf};

/// Where the parts of a lazily converted dataset come from.
pub trait PartSource: Send + Sync + 'static {
    /// The source's name in messages and paths (its URL, redacted).
    fn name(&self) -> &str;

    /// Records in each part, in order: known before any part is converted.
    fn part_records(&self) -> Vec<u64>;

    /// Converts part `part` into the directory `dir` (not there yet; to be
    /// created): one store per stream, the same streams, kinds, element
    /// types and record shapes for every part, and
    /// [`part_records`](Self::part_records)`[part]` records in each. A
    /// conversion must be a pure function of the source: a part converted
    /// again (after its eviction) holds the same records.
    ///
    /// # Errors
    ///
    /// Whatever stops the conversion; the gather that needed the part
    /// returns it inside [`ErrorKind::LazyPart`](crate::ErrorKind::LazyPart).
    fn convert_part(
        &self,
        part: usize,
        dir: &Path,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>>;
}

/// Where and how much a lazily converted dataset caches.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LazyOptions {
    /// The cache directory: part `i` is converted into `part-0000i/` there.
    pub cache_dir: PathBuf,
    /// The cache's bound in bytes (default: unbounded): past it, the parts
    /// least recently needed are deleted.
    pub cache_bytes: u64,
    /// Parts converted at once ahead of the gathers (default 4).
    pub concurrency: usize,
}

impl LazyOptions {
    /// An unbounded cache in `cache_dir`, 4 parts converted at once.
    pub fn new(cache_dir: impl AsRef<Path>) -> LazyOptions {
        LazyOptions {
            cache_dir: cache_dir.as_ref().to_path_buf(),
            cache_bytes: u64::MAX,
            concurrency: 4,
        }
    }

    /// Bounds the cache to `bytes` (at least one part is always kept).
    #[must_use]
    pub fn cache_bytes(mut self, bytes: u64) -> LazyOptions {
        self.cache_bytes = bytes;
        self
    }

    /// Converts up to `n` parts at once (at least 1).
    #[must_use]
    pub fn concurrency(mut self, n: usize) -> LazyOptions {
        self.concurrency = n.max(1);
        self
    }
}

/// What a lazily converted dataset's cache holds and did since it was
/// opened ([`Dataset::lazy_stats`](crate::Dataset::lazy_stats)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LazyStats {
    /// Parts of the source.
    pub parts: u64,
    /// Parts converted and open now.
    pub ready: u64,
    /// Bytes of the parts open now.
    pub cached_bytes: u64,
    /// Parts converted (the same part again after an eviction counts again).
    pub converted: u64,
    /// Parts found already converted in the cache directory.
    pub reopened: u64,
    /// Parts deleted to keep the cache within its bound.
    pub evicted: u64,
}
