//! Multi-part datasets: parts written by many writers at once, each an
//! ordinary set of stores, joined by a manifest into one sequence of
//! records.
//!
//! ```text
//! DIR/
//!   dataset.json          the manifest (written by `merge`, last)
//!   part-00000/           part 0: one store per stream
//!     image/  label/
//!   part-00001/
//!   …
//! ```
//!
//! The format of `dataset.json` is in `docs/format.md` ("Multi-part
//! datasets").

use std::fs;
use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use crate::Generation;
use crate::dense::DynDense;
use crate::dtype::DType;
use crate::error::{Error, ErrorKind};
use crate::format::META_FILE;
use crate::part_index::PartIndex;
use crate::ragged::DynRagged;
use crate::store::Store;

/// The manifest's file name in a dataset directory.
pub const MANIFEST_FILE: &str = "dataset.json";
/// The lock file a merge holds while it writes the manifest.
const LOCK_FILE: &str = ".dataset.lock";
/// The manifest format's version.
const VERSION: u32 = 1;
/// The largest manifest read (a million parts fit in well under this).
const MAX_MANIFEST_LEN: u64 = 256 << 20;
/// The prefix of a part directory's name.
const PART_PREFIX: &str = "part-";
/// Parts whose stores a remote merge opens at once (their stores checked,
/// then dropped before the next ones).
#[cfg(feature = "remote")]
const REMOTE_MERGE_PARTS: usize = 64;
/// Stores a remote open lists and opens at once, so a manifest naming
/// stores that are not there fails at the first ones, before the rest
/// are even named.
#[cfg(feature = "remote")]
const REMOTE_OPEN_STORES: usize = 4096;

/// What a stream's name may hold, as every error about one says: it is
/// one directory name on every file system and object store, and a Python
/// identifier-like key.
pub const STREAM_NAME_RULE: &str = "a name holds only ASCII letters, digits, '_', '-' and '.', \
     and does not start with '.'";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    loaderx_dataset: u32,
    records: u64,
    streams: Vec<StreamSchema>,
    parts: Vec<PartEntry>,
}

/// One stream's schema, as every part holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StreamSchema {
    name: String,
    kind: String,
    dtype: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    item_shape: Option<Vec<usize>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ndim: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dim_bytes: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PartEntry {
    name: String,
    records: u64,
    /// SHA-256 (hex) of the part's streams' names, their `meta.zr` bytes
    /// up to the end of the location table (static page and locations)
    /// and `dict.zr`, and 16 records of each spread over it: what a
    /// re-merge compares to notice a part rewritten with other records.
    /// Absent in manifests written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    table_digest: Option<String>,
}

impl StreamSchema {
    fn of(name: &str, store: &Store) -> StreamSchema {
        match store {
            Store::Dense(d) => StreamSchema {
                name: name.to_owned(),
                kind: "dense".to_owned(),
                dtype: d.dtype().numpy_name().to_owned(),
                item_shape: Some(d.item_shape().to_vec()),
                ndim: None,
                dim_bytes: None,
            },
            Store::Ragged(r) => StreamSchema {
                name: name.to_owned(),
                kind: "ragged".to_owned(),
                dtype: r.dtype().numpy_name().to_owned(),
                item_shape: None,
                ndim: Some(r.ndim()),
                dim_bytes: Some(r.shape_header_len() / r.ndim().max(1)),
            },
        }
    }

    /// Checks the schema's fields are those of its kind and name a known
    /// element type.
    fn check(&self, manifest: &Path) -> Result<(), Error> {
        let bad =
            |detail: String| Error::corrupt(manifest, format!("stream {:?}: {detail}", self.name));
        check_name("stream", &self.name).map_err(|e| Error::corrupt(manifest, e.to_string()))?;
        DType::from_numpy_name(&self.dtype)
            .map_err(|_| bad(format!("unknown dtype {:?}", self.dtype)))?;
        match (
            self.kind.as_str(),
            &self.item_shape,
            self.ndim,
            self.dim_bytes,
        ) {
            ("dense", Some(_), None, None) => Ok(()),
            ("ragged", None, Some(n), Some(4 | 8)) if n >= 1 => Ok(()),
            _ => Err(bad(format!(
                "kind {:?} with item_shape {:?}, ndim {:?}, dim_bytes {:?}",
                self.kind, self.item_shape, self.ndim, self.dim_bytes
            ))),
        }
    }
}

/// True when `name` follows [`STREAM_NAME_RULE`].
fn plain_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// Refuses a stream or part name that is not one plain path component.
fn check_name(what: &str, name: &str) -> Result<(), Error> {
    if plain_name(name) {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{what} name {name:?} is not one plain path component: {STREAM_NAME_RULE}"
        )))
    }
}

/// True for a stream store that is empty and of the JSON generation
/// detected as 2.8.19: nothing in it tells 2.8.19's `u32` dims from
/// 2.8.18's `u64` ones (both write an empty store byte for byte alike), so
/// its `dim_bytes` is whatever its dataset's other parts say.
fn ambiguous_dims(store: &Store) -> bool {
    matches!(store, Store::Ragged(r) if r.is_empty() && r.generation() == Generation::V2_8_19)
}

/// True when `found` (of a store whose dims are ambiguous when
/// `found_ambiguous`) is `want`, or differs from it only in a Ragged
/// stream's dims width that the ambiguous side cannot tell.
fn schema_agrees(want: &StreamSchema, found: &StreamSchema, ambiguous: bool) -> bool {
    want == found
        || (ambiguous
            && want.kind == "ragged"
            && StreamSchema {
                dim_bytes: want.dim_bytes,
                ..found.clone()
            } == *want)
}

/// The index of a part directory's name (`part-` and decimal digits).
pub(crate) fn part_index(name: &str) -> Option<u64> {
    let digits = name.strip_prefix(PART_PREFIX)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// A multi-part dataset, open: every stream is its parts' stores of that
/// name read end to end ([`DynDense::concat`], [`DynRagged::concat`]), so
/// record `i` of part `p` is record `part_starts()[p] + i` of the dataset,
/// and every stream is usable wherever a store is (loaders, samplers,
/// adapters, length indices, digests).
///
/// A dataset is built by many writers at once: writer `I` of `N` writes
/// its share of the source ([`Dataset::part_range`]) as ordinary stores,
/// one per stream, under `DIR/`[`Dataset::part_name`]`(I)/` (each is a
/// store Python loaderx reads on its own); then [`Dataset::merge`] checks
/// every part and writes the manifest. Adding parts and merging again
/// extends the dataset: the records it had keep their ids.
///
/// ```
/// use loaderx_core::{Codec, Dataset, DenseWriter, Store, digest};
///
/// let dir = tempfile::tempdir()?;
/// let data: Vec<u32> = (0..100).collect();
/// // Four writers, each its quarter (they could run anywhere, at once).
/// for part in 0..4 {
///     let range = Dataset::part_range(100, part, 4);
///     let path = dir.path().join(Dataset::part_name(part)).join("x");
///     let mut w = DenseWriter::<u32>::create(&path, &[], Codec::Zstd)?;
///     let rows = &data[range.start as usize..range.end as usize];
///     w.append_slice(rows, rows.len())?;
///     w.close()?;
/// }
/// let merged = Dataset::merge(dir.path(), Some(4))?;
/// assert_eq!(merged.len(), 100);
///
/// let dataset = Dataset::open(dir.path())?;
/// let (name, x) = &dataset.streams()[0];
/// assert_eq!(name, "x");
/// // The same records, in order, as one store holding them.
/// let mut w = DenseWriter::<u32>::create(dir.path().join("one"), &[], Codec::Raw)?;
/// w.append_slice(&data, 100)?;
/// w.close()?;
/// assert_eq!(digest(x)?, digest(&Store::open(dir.path().join("one"))?)?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Dataset {
    path: PathBuf,
    manifest: Manifest,
    index: PartIndex,
    streams: Vec<(String, Store)>,
}

impl std::fmt::Debug for Dataset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dataset")
            .field("path", &self.path)
            .field("records", &self.manifest.records)
            .field("parts", &self.manifest.parts.len())
            .field("streams", &self.stream_names())
            .finish()
    }
}

impl Dataset {
    /// The directory name of part `index`: `part-` and the index in at
    /// least five digits.
    pub fn part_name(index: u64) -> String {
        format!("{PART_PREFIX}{index:05}")
    }

    /// Checks that `name` may name a stream of a dataset (a store in a
    /// part): [`STREAM_NAME_RULE`]. [`merge`](Self::merge) refuses a part
    /// holding a store of another name before it writes anything.
    ///
    /// ```
    /// use loaderx_core::Dataset;
    /// assert!(Dataset::check_stream_name("image_0").is_ok());
    /// let e = Dataset::check_stream_name("my col").unwrap_err();
    /// assert!(e.to_string().contains("ASCII letters, digits"));
    /// ```
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] saying which characters are allowed.
    pub fn check_stream_name(name: &str) -> Result<(), Error> {
        check_name("stream", name)
    }

    /// The records of a source of `records` that writer `index` of `parts`
    /// converts: contiguous, in order, sizes differing by at most one, the
    /// writers' ranges tiling `0..records`.
    ///
    /// # Panics
    ///
    /// Never; `index >= parts` or `parts == 0` give an empty range.
    pub fn part_range(records: u64, index: u64, parts: u64) -> Range<u64> {
        if parts == 0 || index >= parts {
            return records..records;
        }
        let at = |i: u64| (u128::from(records) * u128::from(i) / u128::from(parts)) as u64;
        at(index)..at(index + 1)
    }

    /// True when `dir` holds a dataset manifest (valid or not:
    /// [`open`](Self::open) says).
    pub fn is_dataset_dir(dir: &Path) -> bool {
        dir.join(MANIFEST_FILE).is_file()
    }

    /// Checks every part under `dir` (directories `part-<digits>`, or
    /// symbolic links to directories, in index order, which must run from
    /// 0 without a gap; exactly `expect_parts` of them when given) and
    /// writes the manifest, last and atomically: every part's stores are
    /// published and open, every part has the same streams (names, kinds,
    /// element types, record shapes), each part's streams hold the same
    /// number of records. A part's streams are its directories (links
    /// followed) but hidden ones (a writer's staging), each named as
    /// [`check_stream_name`](Self::check_stream_name) says. The parts are
    /// checked one at a time, each closed before the next, so a merge
    /// holds no descriptor per part. When `dir` has a manifest already,
    /// its parts must still be there, first and unchanged (same records:
    /// the manifest keeps a digest of each part's location tables), and a
    /// merge only extends a dataset. Returns the merged dataset, open.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] naming the part and stream for no
    /// part, a gap in the indices, two directories of one index, a part
    /// name that is not a directory, another part count than
    /// `expect_parts`, a part without stores, a stream name the manifest
    /// cannot hold, streams that differ from part 0's, streams of
    /// different lengths, or a part the existing manifest lists that is
    /// gone or changed; [`ErrorKind::NotPublished`] for a store its writer
    /// has not closed or a directory in a part that is no store;
    /// [`ErrorKind::Busy`] while another merge of `dir` runs or a writer
    /// holds a store; [`ErrorKind::Corrupt`] for an existing manifest that
    /// does not parse; [`ErrorKind::Io`] when the directory cannot be read
    /// or the manifest written. Nothing is written unless every check
    /// passes.
    pub fn merge(dir: impl AsRef<Path>, expect_parts: Option<u64>) -> Result<Dataset, Error> {
        let dir = dir.as_ref();
        #[cfg(feature = "remote")]
        if let Some(url) = dir.to_str().filter(|d| crate::is_url(d)) {
            return Dataset::merge_url(url, expect_parts, &crate::RemoteOptions::from_env());
        }
        let lock_path = dir.join(LOCK_FILE);
        let lock = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| Error::io(&lock_path, e))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                return Err(ErrorKind::Busy {
                    path: dir.to_path_buf(),
                }
                .into());
            }
            Err(fs::TryLockError::Error(e)) => return Err(Error::io(&lock_path, e)),
        }
        let parts = list_parts(dir)?;
        check_part_count(dir, &parts, expect_parts)?;
        // One part's stores open at a time: a merge of many thousand parts
        // holds no descriptor per part.
        let mut merging = Merging::new(dir, parts.len());
        for name in &parts {
            merging.add(name, open_part(&dir.join(name))?)?;
        }
        let manifest = merging.finish();
        if Dataset::is_dataset_dir(dir) {
            check_extends(dir, &read_manifest(dir)?, &manifest)?;
        }
        write_manifest(dir, &manifest)?;
        drop(lock);
        Dataset::open(dir)
    }

    /// [`merge`](Self::merge) of the dataset at the URL prefix `url`
    /// (parts pushed there independently, e.g. by `loaderx convert …
    /// --part I --parts N URL` or [`push_stores`](crate::push_stores)),
    /// reached with `options`. Every part's stores are opened (up to
    /// [`RemoteOptions::concurrency`](crate::RemoteOptions::concurrency)
    /// at once) and checked as locally; the manifest is written last, as
    /// one object, created only if absent or replaced only if it is still
    /// the one this merge read, so of two merges racing one is
    /// [`ErrorKind::Busy`] and writes nothing.
    ///
    /// # Errors
    ///
    /// As [`merge`](Self::merge); a stream of a part whose push has not
    /// published it yet (no `meta.zr`) is [`ErrorKind::NotPublished`];
    /// [`ErrorKind::Remote`] when the object store cannot be read or
    /// written.
    #[cfg(feature = "remote")]
    pub fn merge_url(
        url: &str,
        expect_parts: Option<u64>,
        options: &crate::RemoteOptions,
    ) -> Result<Dataset, Error> {
        Dataset::merge_remote(
            &crate::remote::RemoteDir::new(url, options)?,
            expect_parts,
            options,
        )
    }

    /// [`merge_url`](Self::merge_url) of the prefix `remote`.
    #[cfg(feature = "remote")]
    pub(crate) fn merge_remote(
        remote: &crate::remote::RemoteDir,
        expect_parts: Option<u64>,
        options: &crate::RemoteOptions,
    ) -> Result<Dataset, Error> {
        let dir = PathBuf::from(remote.url());
        let found = remote
            .subdirs("")?
            .into_iter()
            .filter_map(|n| part_index(&n).map(|i| (i, n)))
            .collect();
        let parts = order_parts(&dir, found)?;
        check_part_count(&dir, &parts, expect_parts)?;
        // Only metadata is read: no block cache. A batch of parts at a
        // time, each checked, then dropped, as a local merge does.
        let no_cache = options.clone().no_cache();
        let mut merging = Merging::new(&dir, parts.len());
        for batch in parts.chunks(REMOTE_MERGE_PARTS) {
            // Hidden sub-prefixes (a writer's staging) are not streams, as
            // locally.
            let streams: Vec<Vec<String>> = remote
                .subdirs_of(batch, options.concurrency)?
                .into_iter()
                .map(|names| names.into_iter().filter(|n| !n.starts_with('.')).collect())
                .collect();
            let mut rels = Vec::new();
            for (part, names) in batch.iter().zip(&streams) {
                for s in names {
                    check_stream_at(&dir.join(part).join(s), s)?;
                    rels.push(format!("{part}/{s}"));
                }
            }
            let opened = remote
                .open_stores(&rels, &no_cache)
                .map_err(|e| match e.kind() {
                    ErrorKind::NotAStore { path } => {
                        ErrorKind::NotPublished { path: path.clone() }.into()
                    }
                    _ => e,
                })?;
            let mut opened = opened.into_iter();
            for (part, names) in batch.iter().zip(&streams) {
                let mut stores = Vec::with_capacity(names.len());
                for name in names {
                    let store = opened
                        .next()
                        .ok_or_else(|| Error::invalid("a store went missing"))?;
                    stores.push((name.clone(), Store::from_engine(store)?));
                }
                merging.add(part, stores)?;
            }
        }
        let manifest = merging.finish();
        let old = remote.read_small(MANIFEST_FILE, MAX_MANIFEST_LEN)?;
        if let Some((bytes, _)) = &old {
            check_extends(
                &dir,
                &parse_manifest(bytes, &dir.join(MANIFEST_FILE))?,
                &manifest,
            )?;
        }
        remote.write_small(
            MANIFEST_FILE,
            encode_manifest(&manifest)?,
            old.as_ref().map(|(_, v)| v),
        )?;
        Dataset::open_remote(remote, options)
    }

    /// Opens the dataset in `dir`: reads and checks its manifest, opens
    /// every part's stores and checks them against it (schema and record
    /// count), and joins each stream's parts. The parts' stores are
    /// published, never written again: their shared locks are released
    /// once open, so a dataset of many thousand parts holds no file
    /// descriptor per store.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::NotAStore`] when `dir` has no manifest or a part's
    /// store is missing; [`ErrorKind::Corrupt`] for a manifest that does
    /// not parse, has another version, a field of the wrong kind, unsafe
    /// names, or a record count that is not its parts' sum; and
    /// [`ErrorKind::InvalidArgument`] for a part whose stores hold another
    /// number of records or another schema than the manifest says. As
    /// [`Store::open`] for each store.
    pub fn open(dir: impl AsRef<Path>) -> Result<Dataset, Error> {
        let dir = dir.as_ref();
        #[cfg(feature = "remote")]
        if let Some(url) = dir.to_str().filter(|d| crate::is_url(d)) {
            return Dataset::open_url(url, &crate::RemoteOptions::from_env());
        }
        if !Dataset::is_dataset_dir(dir) {
            return Err(ErrorKind::NotAStore {
                path: dir.to_path_buf(),
            }
            .into());
        }
        let manifest = read_manifest(dir)?;
        // Not sized from the manifest: its parts times its streams can be
        // far more than it names (a missing store ends this at once).
        let mut stores = Vec::new();
        for part in &manifest.parts {
            for schema in &manifest.streams {
                let mut store = Store::open(dir.join(&part.name).join(&schema.name))?;
                store.release_locks();
                stores.push(store);
            }
        }
        assemble(dir, manifest, stores)
    }

    /// [`open`](Self::open) of the dataset at the URL prefix `url`,
    /// reached with `options`: the manifest is one small read, the parts'
    /// stores are opened up to
    /// [`RemoteOptions::concurrency`](crate::RemoteOptions::concurrency)
    /// at once over one client, and
    /// [`RemoteOptions::memory_cache_bytes`](crate::RemoteOptions::memory_cache_bytes)
    /// is the budget of the whole dataset, shared evenly by its stores
    /// (the cache directory's limit is already shared by every store); a
    /// share below one block ([`RemoteOptions::block_bytes`](crate::RemoteOptions::block_bytes))
    /// turns the memory tier off for the dataset rather than exceed the
    /// budget (256 MiB of 256 KiB blocks serve up to 1 024 stores).
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open); [`ErrorKind::Remote`] when the object
    /// store cannot be read.
    #[cfg(feature = "remote")]
    pub fn open_url(url: &str, options: &crate::RemoteOptions) -> Result<Dataset, Error> {
        Dataset::open_remote(&crate::remote::RemoteDir::new(url, options)?, options)
    }

    /// [`open_url`](Self::open_url) of the prefix `remote`.
    #[cfg(feature = "remote")]
    pub(crate) fn open_remote(
        remote: &crate::remote::RemoteDir,
        options: &crate::RemoteOptions,
    ) -> Result<Dataset, Error> {
        let dir = PathBuf::from(remote.url());
        let Some((bytes, _)) = remote.read_small(MANIFEST_FILE, MAX_MANIFEST_LEN)? else {
            return Err(ErrorKind::NotAStore { path: dir }.into());
        };
        let manifest = parse_manifest(&bytes, &dir.join(MANIFEST_FILE))?;
        // A share smaller than one block could hold nothing: the memory
        // tier is then off for the dataset (the cache directory still
        // serves), rather than over the budget.
        let count = (manifest.parts.len() as u64).saturating_mul(manifest.streams.len() as u64);
        let each = options.memory_cache_bytes / count.max(1);
        let each = if each < options.block_bytes { 0 } else { each };
        let per_store = options.clone().memory_cache_bytes(each);
        // The stores' names a batch at a time, never all at once: a
        // manifest's parts times its streams can be far more than it names.
        let mut stores = Vec::new();
        let parts_at_once = (REMOTE_OPEN_STORES / manifest.streams.len()).max(1);
        for batch in manifest.parts.chunks(parts_at_once) {
            let mut rels = Vec::with_capacity(batch.len() * manifest.streams.len());
            for part in batch {
                for schema in &manifest.streams {
                    rels.push(format!("{}/{}", part.name, schema.name));
                }
            }
            for store in remote.open_stores(&rels, &per_store)? {
                stores.push(Store::from_engine(store)?);
            }
        }
        assemble(&dir, manifest, stores)
    }

    /// The dataset of `source`'s parts, each converted the first time a
    /// gather or the loader's look-ahead needs it, into `options`' cache
    /// directory ([`lazy`](crate::lazy)). Part 0 is converted (or found
    /// converted) now: it names the streams and their schemas, which every
    /// other part must have. The streams are ordinary [`Store`]s; their
    /// [`path`](Store::path) is the source's name followed by the stream's.
    /// [`path`](Self::path) is the cache directory: once every part is
    /// converted, [`merge`](Self::merge) of it writes a manifest and makes
    /// it a dataset of its own.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::LazyPart`] when part 0 cannot be converted; as
    /// [`Store::open`] for its stores; [`ErrorKind::InvalidArgument`] for a
    /// source of no part or more than `2^64` records, or a part 0 of no
    /// store.
    pub fn lazy(
        source: std::sync::Arc<dyn crate::lazy::PartSource>,
        options: &crate::lazy::LazyOptions,
    ) -> Result<Dataset, Error> {
        use crate::engine::Engine;
        use crate::engine::lazy::{LazyParts, LazyStream};
        let parts = LazyParts::open(source, options)?;
        let first = parts.dir().join(Dataset::part_name(0));
        let mut streams = Vec::with_capacity(parts.streams().len());
        let mut schemas = Vec::with_capacity(parts.streams().len());
        for (k, name) in parts.streams().iter().enumerate() {
            let store = Store::open(first.join(name))?;
            schemas.push(StreamSchema::of(name, &store));
            let lazy = |engine: Engine| -> Result<Engine, Error> {
                let Engine::Store(template) = engine else {
                    return Err(Error::invalid(format!(
                        "{}: part 0's store {name:?} is not one store",
                        parts.name().display()
                    )));
                };
                Ok(Engine::Lazy(Box::new(LazyStream::new(
                    std::sync::Arc::clone(&parts),
                    k,
                    template,
                ))))
            };
            let store = match store {
                Store::Dense(d) => Store::Dense(d.map_engine(lazy)?),
                Store::Ragged(r) => Store::Ragged(r.map_engine(lazy)?),
            };
            streams.push((name.clone(), store));
        }
        let starts = parts.index().starts();
        let manifest = Manifest {
            loaderx_dataset: VERSION,
            records: parts.index().len(),
            streams: schemas,
            parts: (0..parts.index().parts())
                .map(|p| PartEntry {
                    name: Dataset::part_name(p as u64),
                    records: starts[p + 1] - starts[p],
                    table_digest: None,
                })
                .collect(),
        };
        Ok(Dataset {
            path: parts.dir().to_path_buf(),
            manifest,
            index: parts.index().clone(),
            streams,
        })
    }

    /// Makes a dataset opened with [`lazy`](Self::lazy) permanent: every
    /// part converted (those not in the cache now), linked (hard links;
    /// copies across file systems) into the new directory `out`, and the
    /// manifest written ([`merge`](Self::merge)), so `out` is a multi-part
    /// dataset of the same records, which [`open`](Self::open) reads with
    /// no source. The cache is left as it is.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] for a dataset that was not opened
    /// lazily or when `out` exists; [`ErrorKind::LazyPart`] for a part that cannot be converted;
    /// as [`merge`](Self::merge).
    pub fn freeze(&self, out: impl AsRef<Path>) -> Result<Dataset, Error> {
        let out = out.as_ref();
        let Some(parts) = self.streams.iter().find_map(|(_, s)| match s.engine() {
            crate::engine::Engine::Lazy(l) => Some(std::sync::Arc::clone(l.shared())),
            _ => None,
        }) else {
            return Err(Error::invalid(format!(
                "{}: only a dataset opened lazily can be frozen (this one is already on disk)",
                self.path.display()
            )));
        };
        if std::fs::symlink_metadata(out).is_ok() {
            return Err(Error::invalid(format!(
                "{}: already exists; remove it or choose another output",
                out.display()
            )));
        }
        let name = out
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "dataset".to_owned());
        let staging = out.with_file_name(format!(".{name}.freezing-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&staging);
        std::fs::create_dir_all(&staging).map_err(|e| Error::io(&staging, e))?;
        let n = parts.index().parts();
        let ahead = 4usize;
        let result = (|| -> Result<Dataset, Error> {
            for p in 0..n {
                parts.prefetch_parts(p + 1..(p + 1 + ahead).min(n), true);
                parts.link_part(p, &staging.join(Dataset::part_name(p as u64)))?;
            }
            Dataset::merge(&staging, Some(n as u64))?;
            std::fs::rename(&staging, out).map_err(|e| Error::io(out, e))?;
            Dataset::open(out)
        })();
        if result.is_err() {
            let _ = std::fs::remove_dir_all(&staging);
        }
        result
    }

    /// What the cache of a dataset opened with [`lazy`](Self::lazy) holds
    /// and did; `None` for any other dataset.
    pub fn lazy_stats(&self) -> Option<crate::lazy::LazyStats> {
        self.streams.iter().find_map(|(_, s)| s.lazy_stats())
    }

    /// The dataset's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records in the dataset (every stream holds this many).
    pub fn len(&self) -> u64 {
        self.manifest.records
    }

    /// True when the dataset holds no record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every part's name and record count, in order.
    pub fn parts(&self) -> Vec<(&str, u64)> {
        self.manifest
            .parts
            .iter()
            .map(|p| (p.name.as_str(), p.records))
            .collect()
    }

    /// The first record id of every part, then the total.
    pub fn part_starts(&self) -> Vec<u64> {
        self.index.starts().to_vec()
    }

    /// `(part, index in the part)` of record `record`; `None` past the end.
    pub fn locate(&self, record: u64) -> Option<(usize, u64)> {
        self.index.locate(record)
    }

    /// The map from record ids to parts.
    pub fn part_index(&self) -> &PartIndex {
        &self.index
    }

    /// The streams' names, in the manifest's order.
    pub fn stream_names(&self) -> Vec<&str> {
        self.streams.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// The streams, each its parts joined, by name.
    pub fn streams(&self) -> &[(String, Store)] {
        &self.streams
    }

    /// Unwraps the streams: what a loader's
    /// [`stream`](crate::DataLoaderBuilder::stream)s or a mixture's
    /// [`MixtureSource`](crate::MixtureSource) take.
    pub fn into_streams(self) -> Vec<(String, Store)> {
        self.streams
    }
}

/// Part directory names under `dir`, in index order, checked to run from 0
/// without gap or duplicate.
fn list_parts(dir: &Path) -> Result<Vec<String>, Error> {
    let mut parts = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(i) = part_index(&name) {
            // A symbolic link is followed (parts gathered from several
            // disks); a part name that is not a directory is refused,
            // never skipped.
            let path = entry.path();
            if !fs::metadata(&path)
                .map_err(|e| Error::io(&path, e))?
                .is_dir()
            {
                return Err(Error::invalid(format!(
                    "{}: a part is a directory (or a link to one)",
                    path.display()
                )));
            }
            parts.push((i, name));
        }
    }
    order_parts(dir, parts)
}

/// The stores of the part at `part_dir`, by stream name in name order:
/// every directory in it (a symbolic link followed) but hidden ones (a
/// writer's staging, `.name.creating-…`) is a stream's store; files are
/// ignored. A directory that is no store ([`ErrorKind::NotPublished`], as
/// on object storage, where a push in flight looks the same) is refused,
/// so are names [`Dataset::check_stream_name`] refuses.
fn open_part(part_dir: &Path) -> Result<Vec<(String, Store)>, Error> {
    let mut names = Vec::new();
    for entry in fs::read_dir(part_dir).map_err(|e| Error::io(part_dir, e))? {
        let entry = entry.map_err(|e| Error::io(part_dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if name.starts_with('.')
            || !fs::metadata(&path)
                .map_err(|e| Error::io(&path, e))?
                .is_dir()
        {
            continue;
        }
        names.push(name);
    }
    names.sort();
    let mut stores = Vec::with_capacity(names.len());
    for name in names {
        let path = part_dir.join(&name);
        check_stream_at(&path, &name)?;
        if !path.join(META_FILE).is_file() {
            return Err(ErrorKind::NotPublished { path }.into());
        }
        stores.push((name, Store::open(&path)?));
    }
    Ok(stores)
}

/// [`Dataset::check_stream_name`] of the store at `path`, the error naming
/// it.
fn check_stream_at(path: &Path, name: &str) -> Result<(), Error> {
    check_name("stream", name).map_err(|e| Error::invalid(format!("{}: {e}", path.display())))
}

/// The part names of `parts` (index, name) in index order, checked to run
/// from 0 without gap or duplicate.
fn order_parts(dir: &Path, mut parts: Vec<(u64, String)>) -> Result<Vec<String>, Error> {
    parts.sort();
    if parts.is_empty() {
        return Err(Error::invalid(format!(
            "{}: no part ({}…) to merge",
            dir.display(),
            Dataset::part_name(0)
        )));
    }
    for (k, (i, name)) in parts.iter().enumerate() {
        if *i != k as u64 {
            let (prev, want) = if k > 0 && parts[k - 1].0 == *i {
                (
                    format!("{} and {name}", parts[k - 1].1),
                    "are one index twice",
                )
            } else {
                (Dataset::part_name(k as u64), "is missing")
            };
            return Err(Error::invalid(format!(
                "{}: part {prev} {want} (parts run from {} without a gap)",
                dir.display(),
                Dataset::part_name(0)
            )));
        }
    }
    Ok(parts.into_iter().map(|p| p.1).collect())
}

/// Refuses another number of parts than the writers were told.
fn check_part_count(dir: &Path, parts: &[String], expect: Option<u64>) -> Result<(), Error> {
    match expect {
        Some(n) if parts.len() as u64 != n => Err(Error::invalid(format!(
            "{}: {} parts found, {n} expected",
            dir.display(),
            parts.len()
        ))),
        _ => Ok(()),
    }
}

/// A manifest being built part after part: each part's stores are checked
/// (names, the same streams as part 0, the same number of records in
/// each) and summarized, then dropped, so a merge holds one part open.
struct Merging<'d> {
    dir: &'d Path,
    /// The streams' schema, once a part gave it.
    schema: Option<Vec<StreamSchema>>,
    /// For each stream, whether every part so far had ambiguous dims.
    ambiguous: Vec<bool>,
    first_part: String,
    entries: Vec<PartEntry>,
    total: u64,
}

impl<'d> Merging<'d> {
    fn new(dir: &'d Path, parts: usize) -> Merging<'d> {
        Merging {
            dir,
            schema: None,
            ambiguous: Vec::new(),
            first_part: String::new(),
            entries: Vec::with_capacity(parts),
            total: 0,
        }
    }

    /// Checks and records part `name`, whose stores (by stream name, in
    /// name order) are `stores`.
    fn add(&mut self, name: &str, stores: Vec<(String, Store)>) -> Result<(), Error> {
        let part_dir = self.dir.join(name);
        let Some((first, first_store)) = stores.first() else {
            return Err(Error::invalid(format!(
                "{}: the part holds no store",
                part_dir.display()
            )));
        };
        for (n, _) in &stores {
            check_stream_at(&part_dir.join(n), n)?;
        }
        let this: Vec<StreamSchema> = stores.iter().map(|(n, s)| StreamSchema::of(n, s)).collect();
        let ambiguous: Vec<bool> = stores.iter().map(|(_, s)| ambiguous_dims(s)).collect();
        let records = first_store.len();
        if let Some((n, s)) = stores.iter().find(|(_, s)| s.len() != records) {
            return Err(Error::invalid(format!(
                "{}: stream {n:?} holds {} records, stream {first:?} {records}",
                part_dir.display(),
                s.len(),
            )));
        }
        match &mut self.schema {
            None => {
                self.schema = Some(this);
                self.ambiguous = ambiguous;
                self.first_part = name.to_owned();
            }
            Some(want) => {
                let agree = want.len() == this.len()
                    && want
                        .iter()
                        .zip(&this)
                        .zip(self.ambiguous.iter().zip(&ambiguous))
                        .all(|((w, t), (&aw, &at))| {
                            schema_agrees(w, t, at) || schema_agrees(t, w, aw)
                        });
                if !agree {
                    return Err(Error::invalid(format!(
                        "{}: its streams {} differ from {}'s {}",
                        part_dir.display(),
                        describe(&this),
                        self.first_part,
                        describe(want)
                    )));
                }
                // A part that tells the dims width fixes it for the
                // streams whose parts so far could not.
                for (k, t) in this.into_iter().enumerate() {
                    if self.ambiguous[k] && !ambiguous[k] {
                        want[k] = t;
                        self.ambiguous[k] = false;
                    }
                }
            }
        }
        let mut digest = sha2::Sha256::new();
        for (n, s) in &stores {
            digest.update(n.as_bytes());
            digest.update([0u8]);
            digest.update(s.table_digest());
            digest.update(s.sample_digest()?);
        }
        let digest: String = digest
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        self.total = self.total.checked_add(records).ok_or_else(|| {
            Error::invalid(format!("{}: more than 2^64 records", self.dir.display()))
        })?;
        self.entries.push(PartEntry {
            name: name.to_owned(),
            records,
            table_digest: Some(digest),
        });
        Ok(())
    }

    /// The manifest of the parts added.
    fn finish(self) -> Manifest {
        Manifest {
            loaderx_dataset: VERSION,
            records: self.total,
            streams: self.schema.unwrap_or_default(),
            parts: self.entries,
        }
    }
}

/// Refuses a merge that would change what the last one wrote: its parts
/// must stay first and unchanged, its streams the same.
fn check_extends(dir: &Path, old: &Manifest, new: &Manifest) -> Result<(), Error> {
    // A part of an older manifest has no digest: its name and length are
    // what can be compared. A manifest of empty parts only could not tell
    // a Ragged stream's dims width.
    let kept = old.parts.len() <= new.parts.len()
        && old.parts.iter().zip(&new.parts).all(|(o, n)| {
            o.name == n.name
                && o.records == n.records
                && (o.table_digest.is_none() || o.table_digest == n.table_digest)
        })
        && old.streams.len() == new.streams.len()
        && old
            .streams
            .iter()
            .zip(&new.streams)
            .all(|(o, n)| schema_agrees(n, o, old.records == 0));
    if kept {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{}: the parts or streams of the last merge changed; a merge only adds parts \
             after the merged ones (remove {MANIFEST_FILE} to start over)",
            dir.display()
        )))
    }
}

/// The dataset of `manifest` whose stores, part after part and in each the
/// manifest's streams, are `stores`: each checked against the manifest
/// (schema, record count), then every stream's parts joined.
fn assemble(dir: &Path, manifest: Manifest, stores: Vec<Store>) -> Result<Dataset, Error> {
    let streams_n = manifest.streams.len();
    let mut dense: Vec<Vec<DynDense>> = manifest.streams.iter().map(|_| Vec::new()).collect();
    let mut ragged: Vec<Vec<DynRagged>> = manifest.streams.iter().map(|_| Vec::new()).collect();
    for (at, mut store) in stores.into_iter().enumerate() {
        let (part, k) = (&manifest.parts[at / streams_n], at % streams_n);
        let schema = &manifest.streams[k];
        let path = store.path().to_path_buf();
        if store.len() != part.records {
            return Err(Error::invalid(format!(
                "{}: holds {} records, the manifest says {}",
                path.display(),
                store.len(),
                part.records
            )));
        }
        let mut found = StreamSchema::of(&schema.name, &store);
        if found != *schema && schema_agrees(schema, &found, ambiguous_dims(&store)) {
            // An empty part whose dims could be either width: read as the
            // manifest's (2.8.18's u64 dims), so it joins the others.
            if let Store::Ragged(r) = store {
                store = Store::Ragged(r.with_generation_of_empty(Generation::V2_8_18)?);
                found = StreamSchema::of(&schema.name, &store);
            }
        }
        if found != *schema {
            return Err(Error::invalid(format!(
                "{}: holds {}, the manifest says {}",
                path.display(),
                describe(&[found]),
                describe(std::slice::from_ref(schema))
            )));
        }
        match store {
            Store::Dense(d) => dense[k].push(d),
            Store::Ragged(r) => ragged[k].push(r),
        }
    }
    let mut streams = Vec::with_capacity(streams_n);
    for ((schema, d), r) in manifest.streams.iter().zip(dense).zip(ragged) {
        let path = dir.join(&schema.name);
        let store = if schema.kind == "dense" {
            Store::Dense(DynDense::concat(&path, d)?)
        } else {
            Store::Ragged(DynRagged::concat(&path, r)?)
        };
        streams.push((schema.name.clone(), store));
    }
    let index = PartIndex::new(manifest.parts.iter().map(|p| p.records))?;
    Ok(Dataset {
        path: dir.to_path_buf(),
        manifest,
        index,
        streams,
    })
}

fn describe(streams: &[StreamSchema]) -> String {
    let items: Vec<String> = streams
        .iter()
        .map(|s| match (&s.item_shape, s.ndim) {
            (Some(shape), _) => format!("{} (Dense {} {shape:?})", s.name, s.dtype),
            (None, ndim) => format!(
                "{} (Ragged {} ndim {}, {}-byte dims)",
                s.name,
                s.dtype,
                ndim.unwrap_or(0),
                s.dim_bytes.unwrap_or(0)
            ),
        })
        .collect();
    format!("[{}]", items.join(", "))
}

/// Reads and checks `dir`'s manifest.
fn read_manifest(dir: &Path) -> Result<Manifest, Error> {
    let path = dir.join(MANIFEST_FILE);
    let file = fs::File::open(&path).map_err(|e| Error::io(&path, e))?;
    let len = file.metadata().map_err(|e| Error::io(&path, e))?.len();
    if len > MAX_MANIFEST_LEN {
        return Err(Error::corrupt(
            &path,
            format!("{len} bytes, more than a manifest holds ({MAX_MANIFEST_LEN})"),
        ));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    std::io::Read::read_to_end(&mut std::io::Read::take(file, MAX_MANIFEST_LEN), &mut bytes)
        .map_err(|e| Error::io(&path, e))?;
    parse_manifest(&bytes, &path)
}

/// Parses and checks the manifest `bytes` read from `path`.
fn parse_manifest(bytes: &[u8], path: &Path) -> Result<Manifest, Error> {
    let manifest: Manifest = serde_json::from_slice(bytes)
        .map_err(|e| Error::corrupt(path, format!("not a dataset manifest: {e}")))?;
    if manifest.loaderx_dataset != VERSION {
        return Err(Error::corrupt(
            path,
            format!(
                "manifest version {}, this loaderx reads version {VERSION}",
                manifest.loaderx_dataset
            ),
        ));
    }
    if manifest.streams.is_empty() {
        return Err(Error::corrupt(path, "no stream"));
    }
    if manifest.parts.is_empty() {
        return Err(Error::corrupt(path, "no part"));
    }
    let mut names = std::collections::HashSet::with_capacity(manifest.streams.len());
    for s in &manifest.streams {
        s.check(path)?;
        if !names.insert(s.name.as_str()) {
            return Err(Error::corrupt(
                path,
                format!("stream {:?} listed twice", s.name),
            ));
        }
    }
    let mut sum = 0u64;
    for (i, p) in manifest.parts.iter().enumerate() {
        if part_index(&p.name) != Some(i as u64) {
            return Err(Error::corrupt(
                path,
                format!(
                    "part {i} is named {:?}, not {}",
                    p.name,
                    Dataset::part_name(i as u64)
                ),
            ));
        }
        sum = sum
            .checked_add(p.records)
            .ok_or_else(|| Error::corrupt(path, "more than 2^64 records"))?;
    }
    if sum != manifest.records {
        return Err(Error::corrupt(
            path,
            format!("{} records, but its parts hold {sum}", manifest.records),
        ));
    }
    Ok(manifest)
}

/// The manifest's JSON, as written.
fn encode_manifest(manifest: &Manifest) -> Result<Vec<u8>, Error> {
    let mut bytes = serde_json::to_vec_pretty(manifest)
        .map_err(|e| Error::invalid(format!("cannot encode the manifest: {e}")))?;
    bytes.push(b'\n');
    // What is written is what an open reads back: never a manifest that
    // would make every later open and merge fail.
    parse_manifest(&bytes, Path::new(MANIFEST_FILE))
        .map_err(|e| Error::invalid(format!("the merged manifest would not read back: {e}")))?;
    Ok(bytes)
}

/// Writes `manifest` into `dir` atomically: a temporary file, synced, then
/// renamed over the manifest, and the directory synced.
fn write_manifest(dir: &Path, manifest: &Manifest) -> Result<(), Error> {
    let path = dir.join(MANIFEST_FILE);
    let temp = dir.join(format!(".{MANIFEST_FILE}.tmp-{}", std::process::id()));
    let bytes = encode_manifest(manifest)?;
    let written = (|| {
        let mut f = fs::File::create(&temp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        fs::rename(&temp, &path)?;
        crate::engine::durable::sync_dir(dir)
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&temp);
        return Err(Error::io(&path, e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_ranges_tile_the_records() {
        for records in [0u64, 1, 7, 100, 1001] {
            for parts in 1..9 {
                let mut at = 0;
                for i in 0..parts {
                    let r = Dataset::part_range(records, i, parts);
                    assert_eq!(r.start, at);
                    assert!(r.end - r.start <= records / parts + 1);
                    at = r.end;
                }
                assert_eq!(at, records);
            }
        }
        assert!(Dataset::part_range(10, 3, 3).is_empty());
        assert_eq!(part_index("part-00012"), Some(12));
        assert_eq!(part_index("part-"), None);
        assert_eq!(part_index("part-1x"), None);
        assert_eq!(Dataset::part_name(123_456), "part-123456");
    }
}
