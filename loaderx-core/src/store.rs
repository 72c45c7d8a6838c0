use std::path::Path;

use crate::dense::DynDense;
use crate::dtype::DType;
use crate::engine::StoreReader;
use crate::error::{Error, StoreKind};
use crate::ragged::DynRagged;

/// The names of the stores directly under `dir` (hidden entries left
/// out), sorted: what [`Store::open_dir`] opens.
pub(crate) fn store_names(dir: &Path) -> Result<Vec<String>, Error> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with('.') && Store::is_store_dir(&entry.path()) {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

/// Opens the store at `path`: a local directory, or a URL (`s3://`,
/// `gs://`, `az://`, `http(s)://`) with the options of the environment
/// (feature `remote`).
pub(crate) fn open_reader(path: &Path) -> Result<StoreReader, Error> {
    if let Some(url) = path.to_str().filter(|p| crate::remote_url::is_url(p)) {
        #[cfg(feature = "remote")]
        return crate::remote::open(url, &crate::RemoteOptions::from_env());
        #[cfg(not(feature = "remote"))]
        return Err(Error::invalid(format!(
            "{}: a URL needs loaderx-core's `remote` feature, which this build lacks",
            crate::redact_url(url)
        )));
    }
    StoreReader::open(path)
}

/// The accessors every untyped store ([`DynDense`](crate::DynDense),
/// [`DynRagged`](crate::DynRagged), [`Store`](crate::Store)) shares,
/// written once over its store engine (an `engine()` method).
macro_rules! engine_accessors {
    () => {
        /// What a remote store fetched since it was opened; `None` for a local
        /// one (so always `None` without the `remote` feature).
        pub fn remote_stats(&self) -> Option<crate::RemoteStats> {
            self.engine().remote_stats()
        }

        /// What the cache of a lazily converted dataset's stream
        /// ([`Dataset::lazy`](crate::Dataset::lazy), shared by the
        /// dataset's streams) holds and did; `None` for any other store.
        pub fn lazy_stats(&self) -> Option<crate::lazy::LazyStats> {
            match self.engine() {
                crate::engine::Engine::Lazy(l) => Some(l.shared().stats()),
                _ => None,
            }
        }

        /// Number of records.
        pub fn len(&self) -> u64 {
            self.engine().len()
        }

        /// How the store's records are read ([`ReadMode`](crate::ReadMode);
        /// [`Auto`](crate::ReadMode::Auto) unless set).
        pub fn read_mode(&self) -> crate::ReadMode {
            self.engine().read_mode()
        }

        /// Sets how the store's records are read (every part of a
        /// concatenation). It holds for every handle of this open store (a
        /// [`Stream`](crate::Stream) shares it), and changes speed only:
        /// every path returns the same bytes.
        pub fn set_read_mode(&self, mode: crate::ReadMode) {
            self.engine().set_read_mode(mode);
        }

        /// The store, read in `mode` ([`set_read_mode`](Self::set_read_mode)).
        #[must_use]
        pub fn with_read_mode(self, mode: crate::ReadMode) -> Self {
            self.set_read_mode(mode);
            self
        }

        /// True when the store holds no record.
        pub fn is_empty(&self) -> bool {
            self.len() == 0
        }

        /// The codec.
        pub fn codec(&self) -> crate::Codec {
            self.engine().codec()
        }

        /// Number of payload shards.
        pub fn data_shards(&self) -> usize {
            self.engine().data_shards()
        }

        /// The store directory.
        pub fn path(&self) -> &std::path::Path {
            self.engine().path()
        }

        /// Bytes the store occupies (payloads, table, dictionary).
        pub fn stored_bytes(&self) -> u64 {
            self.engine().stored_bytes()
        }

        /// Bytes of the payload shards alone: the records as stored
        /// (compressed or not). The rest of
        /// [`stored_bytes`](Self::stored_bytes) is the format's index
        /// (`meta.zr`: a 4 KiB header and 16 bytes a record, whatever the
        /// codec) and the dictionary.
        pub fn payload_bytes(&self) -> u64 {
            self.engine().payload_bytes()
        }

        /// The `zstd_dict` dictionary, if any.
        pub fn dict(&self) -> Option<&[u8]> {
            self.engine().dict()
        }

        /// The format generation the store is in (see
        /// [`Generation`](crate::Generation)); a 2.8.18 Dense store is byte
        /// for byte a 2.8.19 one and reads as
        /// [`Generation::V2_8_19`](crate::Generation::V2_8_19).
        pub fn generation(&self) -> crate::Generation {
            self.engine().generation()
        }

        /// The first record index of every part of a concatenation
        /// (`concat`, a multi-part [`Dataset`](crate::Dataset)'s streams),
        /// then the total (`[0, len]` for a store).
        pub fn part_starts(&self) -> Vec<u64> {
            self.engine().starts()
        }
    };
}
pub(crate) use engine_accessors;

/// [`engine_accessors`] and the element type, for the untyped readers
/// ([`DynDense`](crate::DynDense), [`DynRagged`](crate::DynRagged)): the
/// reader has `engine` and `dtype` fields.
macro_rules! reader_accessors {
    () => {
        crate::store::engine_accessors!();

        /// Element type.
        pub fn dtype(&self) -> crate::DType {
            self.dtype
        }

        /// The engine underneath.
        pub(crate) fn engine(&self) -> &crate::engine::Engine {
            &self.engine
        }

        /// The engine underneath, to release its locks.
        pub(crate) fn engine_mut(&mut self) -> &mut crate::engine::Engine {
            &mut self.engine
        }

        /// The same store read through `f(engine)` (a lazily converted
        /// dataset's stream over its part 0's store).
        pub(crate) fn map_engine(
            self,
            f: impl FnOnce(crate::engine::Engine) -> Result<crate::engine::Engine, crate::Error>,
        ) -> Result<Self, crate::Error> {
            Ok(Self {
                engine: f(self.engine)?,
                ..self
            })
        }
    };
}
pub(crate) use reader_accessors;

/// The constructors every untyped store ([`DynDense`](crate::DynDense),
/// [`DynRagged`](crate::DynRagged), [`Store`](crate::Store)) shares,
/// written once: `open` (a path, or a URL with feature `remote`) and
/// `open_url`, both through the type's `from_engine`. `$what` names the
/// stores it opens and `$mismatch` the error for the other contract.
macro_rules! store_openers {
    ($what:literal, $mismatch:literal) => {
        #[doc = concat!("Opens ", $what, " at `path`; with feature `remote`, `path` may")]
        /// be a store URL (`s3://…`, `gs://…`, `az://…`, `http(s)://…`), opened
        // The type exists with feature `remote` only: link it only then.
        #[cfg_attr(
            feature = "remote",
            doc = "with [`RemoteOptions::from_env`](crate::RemoteOptions::from_env)."
        )]
        #[cfg_attr(not(feature = "remote"), doc = "with `RemoteOptions::from_env`.")]
        ///
        /// # Errors
        ///
        /// [`ErrorKind::NotAStore`](crate::ErrorKind::NotAStore) when `path` holds no
        /// store, [`ErrorKind::NotPublished`](crate::ErrorKind::NotPublished) when its
        /// writer never closed it, [`ErrorKind::Busy`](crate::ErrorKind::Busy) while a
        /// writer holds it, [`ErrorKind::Corrupt`](crate::ErrorKind::Corrupt) for malformed
        /// metadata (header, schema, including an element type loaderx does not know,
        /// shard files, dictionary), and
        /// [`ErrorKind::Io`](crate::ErrorKind::Io) when a file cannot be read or locked.
        #[doc = $mismatch]
        /// With a URL, also [`ErrorKind::Remote`](crate::ErrorKind::Remote) when the object
        /// store cannot be read.
        pub fn open(path: impl AsRef<std::path::Path>) -> Result<Self, crate::Error> {
            Self::from_engine(crate::store::open_reader(path.as_ref())?)
        }

        #[doc = concat!("Opens ", $what, " at the URL `url` with the options `options`.")]
        ///
        /// # Errors
        ///
        /// As [`open`](Self::open).
        #[cfg(feature = "remote")]
        pub fn open_url(url: &str, options: &crate::RemoteOptions) -> Result<Self, crate::Error> {
            Self::from_engine(crate::remote::open(url, options)?)
        }
    };
}
pub(crate) use store_openers;

/// The accessors the typed readers ([`Dense<T>`](crate::Dense),
/// [`Ragged<T>`](crate::Ragged)) share, written once: the reader wraps its
/// untyped reader `$dyn` in an `inner` field.
macro_rules! typed_accessors {
    ($dyn:ty) => {
        /// Number of records.
        pub fn len(&self) -> u64 {
            self.inner.len()
        }

        /// True when the store holds no record.
        pub fn is_empty(&self) -> bool {
            self.inner.is_empty()
        }

        /// How the store's records are read ([`ReadMode`](crate::ReadMode)).
        pub fn read_mode(&self) -> crate::ReadMode {
            self.inner.read_mode()
        }

        /// Sets how the store's records are read (see the untyped reader's
        /// `set_read_mode`).
        pub fn set_read_mode(&self, mode: crate::ReadMode) {
            self.inner.set_read_mode(mode);
        }

        /// The store, read in `mode`.
        #[must_use]
        pub fn with_read_mode(self, mode: crate::ReadMode) -> Self {
            self.set_read_mode(mode);
            self
        }

        /// The untyped reader.
        pub fn as_dyn(&self) -> &$dyn {
            &self.inner
        }

        /// Unwraps the untyped reader.
        pub fn into_dyn(self) -> $dyn {
            self.inner
        }
    };
}
pub(crate) use typed_accessors;

/// An open store of either contract.
///
/// Opening a store whose contract is only known at run time.
pub enum Store {
    /// A Dense store.
    Dense(DynDense),
    /// A Ragged store.
    Ragged(DynRagged),
}

impl From<DynDense> for Store {
    fn from(s: DynDense) -> Store {
        Store::Dense(s)
    }
}

impl From<DynRagged> for Store {
    fn from(s: DynRagged) -> Store {
        Store::Ragged(s)
    }
}

impl<T: crate::Element> From<crate::Dense<T>> for Store {
    fn from(s: crate::Dense<T>) -> Store {
        Store::Dense(s.into_dyn())
    }
}

impl<T: crate::Element> From<crate::Ragged<T>> for Store {
    fn from(s: crate::Ragged<T>) -> Store {
        Store::Ragged(s.into_dyn())
    }
}

/// Records a dataset merge reads from each store to notice a part
/// rewritten with other records ([`Store::sample_digest`]).
pub(crate) const SAMPLED_RECORDS: u64 = 16;

impl Store {
    /// True when the local directory `path` holds a store's metadata file
    /// (published or not, valid or not: [`open`](Self::open) says): what a
    /// tool walking a tree of stores looks for.
    ///
    /// ```
    /// use loaderx_core::{Codec, DenseWriter, Store};
    ///
    /// let dir = tempfile::tempdir()?;
    /// assert!(!Store::is_store_dir(dir.path()));
    /// let mut w = DenseWriter::<u8>::create(dir.path().join("x"), &[], Codec::Raw)?;
    /// w.append_slice(&[1, 2], 2)?;
    /// w.close()?;
    /// assert!(Store::is_store_dir(&dir.path().join("x")));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_store_dir(path: &std::path::Path) -> bool {
        path.join(crate::format::META_FILE).is_file()
    }

    crate::store::store_openers!("the store, whichever contract its schema declares,", "");

    /// Every store directly under `dir` (a converted split such as
    /// `fashion/train` holding `image/` and `label/`), named after its
    /// directory, in name order; entries that hold no store (no
    /// [`META_FILE`](crate::format::META_FILE)) are skipped, and so are
    /// hidden ones (a name starting with `.`: a writer's staging, never a
    /// stream).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Io`](crate::ErrorKind::Io) when `dir` cannot be listed, and as
    /// [`open`](Self::open) for a store under it.
    pub fn open_dir(dir: impl AsRef<Path>) -> Result<Vec<(String, Store)>, Error> {
        let dir = dir.as_ref();
        store_names(dir)?
            .into_iter()
            .map(|name| {
                let store = Store::open(dir.join(&name))?;
                Ok((name, store))
            })
            .collect()
    }

    /// The Dense store, if this is one.
    pub fn as_dense(&self) -> Option<&DynDense> {
        match self {
            Store::Dense(s) => Some(s),
            Store::Ragged(_) => None,
        }
    }

    /// The Ragged store, if this is one.
    pub fn as_ragged(&self) -> Option<&DynRagged> {
        match self {
            Store::Ragged(s) => Some(s),
            Store::Dense(_) => None,
        }
    }

    /// Drops the shared locks the store's files are held with (a
    /// published store is never written again; a dataset's many parts
    /// then hold no descriptor each).
    pub(crate) fn release_locks(&mut self) {
        match self {
            Store::Dense(s) => s.engine_mut().release_locks(),
            Store::Ragged(s) => s.engine_mut().release_locks(),
        }
    }

    pub(crate) fn from_engine(engine: StoreReader) -> Result<Store, Error> {
        Ok(match engine.schema().kind() {
            StoreKind::Dense => Store::Dense(DynDense::from_engine(engine)?),
            StoreKind::Ragged => Store::Ragged(DynRagged::from_engine(engine)?),
        })
    }

    crate::store::engine_accessors!();

    /// SHA-256 of every store read's location table and dictionary
    /// ([`StoreReader::table_digest`](crate::engine::StoreReader)), in
    /// order.
    pub(crate) fn table_digest(&self) -> [u8; 32] {
        use sha2::Digest as _;
        let mut h = sha2::Sha256::new();
        for r in self.engine().stores() {
            h.update(r.table_digest());
        }
        h.finalize().into()
    }

    /// SHA-256 of [`SAMPLED_RECORDS`] records spread evenly over the store
    /// (all of them when it holds fewer): each one's index, shape and
    /// element bytes as read. What a dataset's manifest adds to the table
    /// digest, so that a part rewritten with other records of the same
    /// lengths (a Raw Dense store's table is the same for any records) is
    /// noticed without reading every payload.
    ///
    /// # Errors
    ///
    /// Any error of reading those records.
    pub(crate) fn sample_digest(&self) -> Result<[u8; 32], Error> {
        use sha2::Digest as _;
        let n = self.len();
        let indices: Vec<u64> = if n <= SAMPLED_RECORDS {
            (0..n).collect()
        } else {
            // Evenly spread, the first and the last included; `n - 1` is
            // below 2^64 and `k < 16`, so the product fits in u128.
            (0..SAMPLED_RECORDS)
                .map(|k| {
                    (u128::from(k) * u128::from(n - 1) / u128::from(SAMPLED_RECORDS - 1)) as u64
                })
                .collect()
        };
        let mut h = sha2::Sha256::new();
        match self {
            Store::Dense(s) => {
                let bytes = s.gather_bytes(&indices)?;
                for (i, rec) in indices.iter().zip(bytes.chunks(s.record_bytes().max(1))) {
                    h.update(i.to_le_bytes());
                    h.update(rec);
                }
            }
            Store::Ragged(s) => {
                let batch = s.gather_packed(&indices)?;
                for (k, i) in indices.iter().enumerate() {
                    h.update(i.to_le_bytes());
                    for d in batch.shape(k) {
                        h.update((*d as u64).to_le_bytes());
                    }
                    h.update(batch.bytes(k));
                }
            }
        }
        Ok(h.finalize().into())
    }

    /// The engine underneath.
    pub(crate) fn engine(&self) -> &crate::engine::Engine {
        match self {
            Store::Dense(s) => s.engine(),
            Store::Ragged(s) => s.engine(),
        }
    }

    /// The record contract.
    pub fn kind(&self) -> StoreKind {
        match self {
            Store::Dense(_) => StoreKind::Dense,
            Store::Ragged(_) => StoreKind::Ragged,
        }
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        match self {
            Store::Dense(s) => s.dtype(),
            Store::Ragged(s) => s.dtype(),
        }
    }

    /// Element bytes of all records (without Ragged shape headers); reads
    /// every location of a Ragged store.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::CorruptRecord`](crate::ErrorKind::CorruptRecord) for a malformed
    /// location of a Ragged store.
    pub fn logical_bytes(&self) -> Result<u64, Error> {
        match self {
            Store::Dense(s) => Ok(s.len() * s.record_bytes() as u64),
            Store::Ragged(s) => s.logical_bytes(),
        }
    }

    /// Visits every record in order, in bounded batches, with its shape and
    /// element bytes. Every record is read and decoded; `bool` bytes must be 0 or 1.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::CorruptRecord`](crate::ErrorKind::CorruptRecord) for a malformed
    /// record (or a `bool` byte other than 0 or 1),
    /// [`ErrorKind::Buffer`](crate::ErrorKind::Buffer) when a read batch cannot be
    /// allocated, and any error `visit` returns, which stops the visit.
    pub fn for_each_record(
        &self,
        mut visit: impl FnMut(u64, &[usize], &[u8]) -> Result<(), Error>,
    ) -> Result<(), Error> {
        const BATCH_BYTES: usize = 32 << 20;
        let n = self.len();
        let check_bool = self.dtype() == DType::Bool;
        let bad_bool = |index: u64| {
            Error::corrupt_record(self.path(), index, "a bool element is neither 0 nor 1")
        };
        let mut start = 0u64;
        match self {
            Store::Dense(s) => {
                let per = (BATCH_BYTES / s.record_bytes().max(1)).max(1) as u64;
                let mut buf = Vec::new();
                while start < n {
                    let end = n.min(start + per);
                    let idx: Vec<u64> = (start..end).collect();
                    buf.resize(idx.len() * s.record_bytes(), 0);
                    if let Err(e) = s.gather_into(&idx, &mut buf) {
                        return Err(first_failure(&idx, e, |i| {
                            let mut one = vec![0u8; s.record_bytes()];
                            s.gather_into(&[i], &mut one)
                        }));
                    }
                    for (k, rec) in buf.chunks_exact(s.record_bytes()).enumerate() {
                        let index = start + k as u64;
                        if check_bool && rec.iter().any(|&b| b > 1) {
                            return Err(bad_bool(index));
                        }
                        visit(index, s.item_shape(), rec)?;
                    }
                    start = end;
                }
            }
            Store::Ragged(s) => {
                while start < n {
                    let end = n.min(start + 4096);
                    let idx: Vec<u64> = (start..end).collect();
                    let batch = s
                        .gather(&idx)
                        .map_err(|e| first_failure(&idx, e, |i| s.gather(&[i]).map(drop)))?;
                    for k in 0..batch.len() {
                        let index = start + k as u64;
                        let rec = batch.bytes(k);
                        if check_bool && rec.iter().any(|&b| b > 1) {
                            return Err(bad_bool(index));
                        }
                        visit(index, batch.shape(k), rec)?;
                    }
                    start = end;
                }
            }
        }
        Ok(())
    }
}

/// A batch read in parallel reports whichever bad record a worker met first;
/// this reads `indices` one by one and returns the error of the lowest one
/// that fails (or `batch_error` if none fails alone).
fn first_failure(
    indices: &[u64],
    batch_error: Error,
    read_one: impl Fn(u64) -> Result<(), Error>,
) -> Error {
    indices
        .iter()
        .find_map(|&i| read_one(i).err())
        .unwrap_or(batch_error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Codec, DenseWriter, ErrorKind, RaggedWriter};

    #[test]
    fn a_directory_opens_as_its_stores_in_name_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = RaggedWriter::<u16>::create(dir.path().join("tok"), 1, Codec::Raw).unwrap();
        w.append([vec![1u16, 2], vec![3]]).unwrap();
        w.close().unwrap();
        let mut w = DenseWriter::<u8>::create(dir.path().join("label"), &[], Codec::Raw).unwrap();
        w.append_slice(&[7, 8], 2).unwrap();
        w.close().unwrap();
        std::fs::create_dir(dir.path().join("notes")).unwrap();
        std::fs::write(dir.path().join("README"), "not a store").unwrap();
        let mut w = DenseWriter::<u8>::create(dir.path().join(".staged"), &[], Codec::Raw).unwrap();
        w.append_slice(&[9], 1).unwrap();
        w.close().unwrap();

        let stores = Store::open_dir(dir.path()).unwrap();
        let names: Vec<&str> = stores.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["label", "tok"]);
        assert_eq!(stores[0].1.kind(), StoreKind::Dense);
        assert_eq!(stores[1].1.len(), 2);

        let Err(e) = Store::open_dir(dir.path().join("missing")) else {
            panic!("a missing directory cannot be listed");
        };
        assert!(matches!(e.kind(), ErrorKind::Io { .. }), "{e}");
    }
}
