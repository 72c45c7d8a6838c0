//! Datasets opened where they live (`loaderx_convert::lazy`): which
//! locations are read that way, and the options every command that opens
//! one takes (`dataset info|digest|verify|freeze`, `profile`).

use std::path::{Path, PathBuf};

use clap::Args;
use loaderx_convert::lazy::{OpenOptions, is_lazy_location, open};
use loaderx_core::Dataset;

use crate::Error;

/// How a dataset opened where it lives is cached.
#[derive(Debug, Clone, Args)]
pub(crate) struct LazyArgs {
    /// The config (subset) of an hf:// dataset (default: as `convert hf`
    /// picks it).
    #[arg(long, value_name = "NAME")]
    config: Option<String>,
    /// The cache directory of converted row groups (default:
    /// $LOADERX_CACHE_DIR or ~/.cache/loaderx, under lazy/).
    #[arg(long, value_name = "DIR")]
    cache: Option<PathBuf>,
    /// The cache's bound in bytes (suffixes K, M, G, T: powers of 1024;
    /// default 32G); the row groups least recently needed are evicted.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    cache_bytes: Option<u64>,
    /// Row groups fetched and converted at once.
    #[arg(long, value_name = "N", default_value_t = 4)]
    fetches: usize,
}

/// `8G`, `512M`, `64K`, `1T` (powers of 1024, an optional `iB` or `B`) or
/// plain bytes.
pub(crate) fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(t);
    let (digits, shift) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return Err(format!("{s:?}: unknown size suffix {c:?} (K, M, G or T)")),
            };
            (&t[..i], shift)
        }
        _ => (t, 0),
    };
    let n: u64 = digits
        .trim()
        .parse()
        .map_err(|_| format!("{s:?}: not a size in bytes (e.g. 8G, 512M, 1048576)"))?;
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("{s:?}: too large"))
}

/// True when `path` is read where it lives rather than opened as a
/// converted dataset: an `hf://` address, a parquet URL, prefix or glob,
/// or local parquet files (a `.parquet` file, a glob, or a directory that
/// is not a dataset and holds parquet files).
pub(crate) fn is_lazy(path: &Path) -> bool {
    let Some(s) = path.to_str() else {
        return false;
    };
    if is_lazy_location(s) {
        return true;
    }
    if loaderx_core::is_url(s) {
        return false;
    }
    s.ends_with(".parquet")
        || s.contains(['*', '?'])
        || (path.is_dir()
            && !Dataset::is_dataset_dir(path)
            && std::fs::read_dir(path).is_ok_and(|entries| {
                entries
                    .flatten()
                    .any(|e| e.path().extension().is_some_and(|x| x == "parquet"))
            }))
}

impl LazyArgs {
    /// Opens `location` where it lives, the Hub split `split` (default
    /// `train`).
    pub(crate) fn open(&self, location: &Path, split: Option<&str>) -> Result<Dataset, Error> {
        let mut o = OpenOptions::new().concurrency(self.fetches);
        if let Some(s) = split {
            o = o.split(s);
        }
        if let Some(c) = &self.config {
            o = o.config(c.clone());
        }
        if let Some(d) = &self.cache {
            o = o.cache_dir(d.clone());
        }
        if let Some(b) = self.cache_bytes {
            o = o.cache_bytes(b);
        }
        Ok(open(&location.to_string_lossy(), &o)?)
    }

    /// A dataset at `dir`: opened where it lives when it is a parquet
    /// location ([`is_lazy`]), else as a multi-part dataset.
    /// A URL prefix ending in `/` is a dataset when it holds a manifest,
    /// else parquet objects under it.
    pub(crate) fn dataset(&self, dir: &Path, split: Option<&str>) -> Result<Dataset, Error> {
        if is_lazy(dir) {
            return self.open(dir, split);
        }
        match Dataset::open(dir) {
            Err(e)
                if matches!(e.kind(), loaderx_core::ErrorKind::NotAStore { .. })
                    && dir
                        .to_str()
                        .is_some_and(|s| loaderx_core::is_url(s) && s.ends_with('/')) =>
            {
                self.open(dir, split)
            }
            other => Ok(other?),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_bytes;

    #[test]
    fn sizes_parse_in_powers_of_1024() {
        assert_eq!(parse_bytes("8G"), Ok(8 << 30));
        assert_eq!(parse_bytes("512MiB"), Ok(512 << 20));
        assert_eq!(parse_bytes("64k"), Ok(64 << 10));
        assert_eq!(parse_bytes("1048576"), Ok(1 << 20));
        assert_eq!(parse_bytes("100B"), Ok(100));
        assert!(parse_bytes("8X").is_err());
        assert!(parse_bytes("99999999999T").is_err());
        assert!(parse_bytes("").is_err());
    }
}
