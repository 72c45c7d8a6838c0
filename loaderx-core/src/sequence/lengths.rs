//! Per-record sequence lengths of a Ragged store, and their sidecar file.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;
use sha2::{Digest, Sha256};

use crate::error::Error;
use crate::ragged::DynRagged;

/// First bytes of a sidecar file.
const MAGIC: &[u8; 8] = b"LXLENS01";
/// Magic, record count, store identity.
const HEAD: usize = 8 + 8 + 32;
/// Records whose shape headers one decoding job reads (rank ≥ 2 only).
const CHUNK: usize = 4096;

/// Every record's length along its first axis (the sequence axis), in
/// record order: what length-bucketed sampling and packing work from.
///
/// Cheap to clone (the lengths are shared). A scalar record has length 1.
///
/// ## How it is built
///
/// A Ragged record is its shape header (`ndim` little-endian `u64`s) and
/// its elements, so for **rank-1** records — token sequences — the length
/// is `(logical_length - 8) / element_size`, read straight from the
/// location table: nothing is decompressed, whatever the codec, and a
/// million records take a few milliseconds. For rank ≥ 2 the first axis
/// needs the header; records are then decoded in parallel chunks (the
/// header is the start of the zstd frame, but frames are small, so whole
/// records are decoded — simpler, and bounded by one pass over the store).
///
/// [`DynRagged::lengths`] builds it once per open store and caches it in
/// memory; [`write_sidecar`](Self::write_sidecar) /
/// [`read_sidecar`](Self::read_sidecar) persist it in a file **next to**
/// the store (`<store>.lengths`, never inside it, so Python loaderx reads
/// the store unchanged), bound to the store's identity: the SHA-256 of its
/// `meta.zr` (header page and location table).
///
/// ```
/// use loaderx_core::{Codec, Ragged, RaggedWriter};
/// use loaderx_core::sequence::LengthIndex;
///
/// let dir = tempfile::tempdir()?;
/// let mut w = RaggedWriter::<u32>::create(dir.path().join("tok"), 1, Codec::Zstd)?;
/// w.append([vec![1u32, 2, 3], vec![4], vec![5, 6]])?;
/// w.close()?;
/// let tok = Ragged::<u32>::open(dir.path().join("tok"))?;
/// assert_eq!(tok.as_dyn().lengths()?.lengths(), &[3, 1, 2]);
///
/// let index = LengthIndex::build(tok.as_dyn())?;
/// let sidecar = index.write_sidecar(tok.as_dyn())?;
/// assert_eq!(sidecar, dir.path().join("tok.lengths"));
/// assert_eq!(LengthIndex::read_sidecar(tok.as_dyn())?, Some(index));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct LengthIndex {
    lengths: Arc<[u32]>,
    total: u64,
    max: u32,
}

impl std::fmt::Debug for LengthIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LengthIndex")
            .field("records", &self.len())
            .field("total", &self.total)
            .field("max", &self.max)
            .finish()
    }
}

impl LengthIndex {
    /// An index of the given lengths (e.g. computed by other means); each
    /// must be at least 1.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument)
    /// for a zero length.
    pub fn from_lengths(lengths: impl Into<Arc<[u32]>>) -> Result<LengthIndex, Error> {
        let lengths: Arc<[u32]> = lengths.into();
        if let Some(i) = lengths.iter().position(|&l| l == 0) {
            return Err(Error::invalid(format!(
                "record {i} has length 0; every record holds at least one element"
            )));
        }
        let total = lengths.iter().map(|&l| u64::from(l)).sum();
        let max = lengths.iter().copied().max().unwrap_or(0);
        Ok(LengthIndex {
            lengths,
            total,
            max,
        })
    }

    /// Builds the index of `store` (see [How it is built](Self#how-it-is-built)).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::CorruptRecord`](crate::ErrorKind::CorruptRecord) when a
    /// location or shape header is inconsistent, or a first-axis length
    /// does not fit `u32`; the store's read errors for rank ≥ 2.
    pub fn build(store: &DynRagged) -> Result<LengthIndex, Error> {
        let n = store.len();
        let ndim = store.ndim();
        let lengths: Vec<u32> = match ndim {
            0 => vec![1; to_usize(n)?],
            1 => {
                let size = store.dtype().size() as u64;
                let head = store.shape_header_len() as u64;
                (0..to_usize(n)?)
                    .into_par_iter()
                    .with_min_len(1 << 14)
                    .map(|i| {
                        let i = i as u64;
                        let logic = u64::from(store.loc(i)?.logic_length);
                        let payload = logic.checked_sub(head).filter(|p| *p > 0 && p % size == 0);
                        payload
                            .and_then(|p| u32::try_from(p / size).ok())
                            .ok_or_else(|| {
                                Error::corrupt_record(
                                    store.path(),
                                    i,
                                    format!(
                                        "{logic} bytes are not a {head}-byte shape header and \
                                         whole {} elements",
                                        store.dtype()
                                    ),
                                )
                            })
                    })
                    .collect::<Result<_, Error>>()?
            }
            _ => {
                let ids: Vec<u64> = (0..n).collect();
                let parts = ids
                    .par_chunks(CHUNK)
                    .map(|chunk| {
                        let batch = store.gather(chunk)?;
                        (0..batch.len())
                            .map(|j| {
                                let first = batch.shape(j)[0];
                                u32::try_from(first).map_err(|_| {
                                    Error::corrupt_record(
                                        store.path(),
                                        chunk[j],
                                        format!("first-axis length {first} does not fit u32"),
                                    )
                                })
                            })
                            .collect::<Result<Vec<u32>, Error>>()
                    })
                    .collect::<Result<Vec<_>, Error>>()?;
                parts.concat()
            }
        };
        if let Some(i) = lengths.iter().position(|&l| l == 0) {
            return Err(Error::corrupt_record(
                store.path(),
                i as u64,
                "record of length 0 along its first axis",
            ));
        }
        LengthIndex::from_lengths(lengths)
    }

    /// The lengths, in record order.
    pub fn lengths(&self) -> &[u32] {
        &self.lengths
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.lengths.len()
    }

    /// True when there is no record.
    pub fn is_empty(&self) -> bool {
        self.lengths.is_empty()
    }

    /// Length of record `index`, or `None` past the end.
    pub fn get(&self, index: u64) -> Option<u32> {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.lengths.get(i).copied())
    }

    /// Sum of all lengths.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Largest length (0 when empty).
    pub fn max(&self) -> u32 {
        self.max
    }

    /// Where the sidecar of the store at `store` lies: the sibling
    /// `<store>.lengths` (for `data/train/tok`, `data/train/tok.lengths`).
    pub fn sidecar_path(store: &Path) -> PathBuf {
        let mut name = store.file_name().unwrap_or_default().to_os_string();
        name.push(".lengths");
        store.with_file_name(name)
    }

    /// Writes this index as the sidecar of `store` (atomically: a temporary
    /// sibling renamed into place) and returns its path.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument)
    /// when the index does not have the store's record count;
    /// [`ErrorKind::Io`](crate::ErrorKind::Io) when `meta.zr` cannot be
    /// read or the file cannot be written.
    pub fn write_sidecar(&self, store: &DynRagged) -> Result<PathBuf, Error> {
        if self.len() as u64 != store.len() {
            return Err(Error::invalid(format!(
                "a length index of {} records cannot describe a store of {}",
                self.len(),
                store.len()
            )));
        }
        let path = Self::sidecar_path(store.path());
        let mut bytes = Vec::with_capacity(HEAD + 4 * self.len() + 32);
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&(self.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&identity(store)?);
        for &l in self.lengths.iter() {
            bytes.extend_from_slice(&l.to_le_bytes());
        }
        let check = Sha256::digest(&bytes);
        bytes.extend_from_slice(&check);
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(path.file_name().unwrap_or_default());
        tmp_name.push(format!(".tmp-{}", std::process::id()));
        let tmp = path.with_file_name(tmp_name);
        let written = std::fs::File::create(&tmp)
            .and_then(|mut f| f.write_all(&bytes).and_then(|()| f.sync_all()))
            .and_then(|()| std::fs::rename(&tmp, &path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(Error::io(&path, e));
        }
        Ok(path)
    }

    /// Reads the sidecar of `store`: `None` when there is none, or when it
    /// belongs to another store (a store rebuilt at the same path) or is
    /// larger than any sidecar of this store — then it is stale and should
    /// be rebuilt.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Corrupt`](crate::ErrorKind::Corrupt) for a sidecar
    /// that is truncated or fails its checksum;
    /// [`ErrorKind::Io`](crate::ErrorKind::Io) when it or `meta.zr` cannot
    /// be read.
    pub fn read_sidecar(store: &DynRagged) -> Result<Option<LengthIndex>, Error> {
        let path = Self::sidecar_path(store.path());
        let file = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(&path, e)),
        };
        // The file's size is not trusted to size memory: a sidecar larger
        // than this store's can only be stale (another store's) or damaged,
        // and is rebuilt rather than read.
        let most = store
            .len()
            .checked_mul(4)
            .and_then(|n| n.checked_add((HEAD + 32) as u64));
        let size = file.metadata().map_err(|e| Error::io(&path, e))?.len();
        if most.is_none_or(|most| size > most) {
            return Ok(None);
        }
        let mut bytes = Vec::new();
        file.take(size)
            .read_to_end(&mut bytes)
            .map_err(|e| Error::io(&path, e))?;
        if bytes.len() < HEAD + 32 || &bytes[..8] != MAGIC {
            return Err(Error::corrupt(&path, "not a loaderx length sidecar"));
        }
        let (body, check) = bytes.split_at(bytes.len() - 32);
        if Sha256::digest(body).as_slice() != check {
            return Err(Error::corrupt(&path, "length sidecar fails its checksum"));
        }
        let mut count = [0u8; 8];
        count.copy_from_slice(&body[8..16]);
        let count = u64::from_le_bytes(count);
        if count != store.len() || body[16..HEAD] != identity(store)? {
            return Ok(None);
        }
        let lengths = &body[HEAD..];
        if count.checked_mul(4) != Some(lengths.len() as u64) {
            return Err(Error::corrupt(
                &path,
                format!("{} length bytes for {count} records", lengths.len()),
            ));
        }
        let lengths: Vec<u32> = lengths
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        LengthIndex::from_lengths(lengths)
            .map(Some)
            .map_err(|e| Error::corrupt(&path, e.to_string()))
    }

    /// The sidecar's index when it is there and current; otherwise a fresh
    /// [`build`](Self::build), then written as the sidecar when the
    /// directory allows (a read-only location only costs the rebuild next
    /// time).
    ///
    /// # Errors
    ///
    /// As [`read_sidecar`](Self::read_sidecar) and [`build`](Self::build).
    pub fn load_or_build(store: &DynRagged) -> Result<LengthIndex, Error> {
        if let Some(index) = Self::read_sidecar(store)? {
            return Ok(index);
        }
        let index = Self::build(store)?;
        // A cache: failing to persist it changes nothing but speed.
        let _ = index.write_sidecar(store);
        Ok(index)
    }
}

fn to_usize(n: u64) -> Result<usize, Error> {
    usize::try_from(n).map_err(|_| Error::invalid(format!("{n} records do not fit this machine")))
}

/// SHA-256 of the store's `meta.zr`: header page and location table, which
/// change with any record of a (never modified) published store.
fn identity(store: &DynRagged) -> Result<[u8; 32], Error> {
    let meta = store.path().join("meta.zr");
    let bytes = std::fs::read(&meta).map_err(|e| Error::io(&meta, e))?;
    Ok(Sha256::digest(&bytes).into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Codec, RaggedWriter};

    fn store(dir: &Path, name: &str, ndim: usize, codec: Codec) -> DynRagged {
        let path = dir.join(name);
        let mut w = RaggedWriter::<u16>::create(&path, ndim, codec).unwrap();
        let records: Vec<ndarray::ArrayD<u16>> = (0..300usize)
            .map(|i| {
                let len = 1 + (i * 37) % 50;
                let shape: Vec<usize> = if ndim == 1 { vec![len] } else { vec![len, 3] };
                let n: usize = shape.iter().product();
                ndarray::ArrayD::from_shape_vec(shape, (0..n as u16).collect()).unwrap()
            })
            .collect();
        w.append(records.iter().map(|a| a.view())).unwrap();
        w.close().unwrap();
        DynRagged::open(&path).unwrap()
    }

    #[test]
    fn lengths_match_the_gathered_shapes_for_every_rank_and_codec() {
        let dir = tempfile::tempdir().unwrap();
        for (k, codec) in [Codec::Raw, Codec::Zstd].into_iter().enumerate() {
            for ndim in 1..3 {
                let s = store(dir.path(), &format!("s{k}{ndim}"), ndim, codec);
                let index = s.lengths().unwrap();
                let all: Vec<u64> = (0..s.len()).collect();
                let b = s.gather(&all).unwrap();
                let want: Vec<u32> = (0..b.len())
                    .map(|i| b.shape(i).first().map_or(1, |&d| d as u32))
                    .collect();
                assert_eq!(index.lengths(), &want[..], "ndim {ndim} {codec}");
                assert_eq!(
                    index.total(),
                    want.iter().map(|&l| u64::from(l)).sum::<u64>()
                );
                assert_eq!(index.max(), *want.iter().max().unwrap());
            }
        }
    }

    #[test]
    fn sidecar_round_trips_and_is_bound_to_its_store() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path(), "a", 1, Codec::Zstd);
        assert_eq!(LengthIndex::read_sidecar(&s).unwrap(), None);
        let built = LengthIndex::load_or_build(&s).unwrap();
        let path = LengthIndex::sidecar_path(s.path());
        assert!(path.exists() && !s.path().join("a.lengths").exists());
        assert_eq!(LengthIndex::read_sidecar(&s).unwrap(), Some(built.clone()));
        // Another store at the same path: the sidecar is stale, not used.
        drop(s);
        std::fs::remove_dir_all(dir.path().join("a")).unwrap();
        let path2 = dir.path().join("a");
        let mut w = RaggedWriter::<u16>::create(&path2, 1, Codec::Raw).unwrap();
        w.append([vec![1u16, 2]]).unwrap();
        w.close().unwrap();
        let s2 = DynRagged::open(&path2).unwrap();
        assert_eq!(LengthIndex::read_sidecar(&s2).unwrap(), None);
        assert_eq!(LengthIndex::load_or_build(&s2).unwrap().lengths(), &[2]);
        // A damaged sidecar is an error, not silently trusted.
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 40;
        bytes[last] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let e = LengthIndex::read_sidecar(&s2).unwrap_err();
        assert!(matches!(e.kind(), crate::ErrorKind::Corrupt { .. }), "{e}");
        std::fs::write(&path, &bytes[..20]).unwrap();
        assert!(LengthIndex::read_sidecar(&s2).is_err());
        // A (sparse) 64 GiB sidecar is not read into memory: larger than any
        // sidecar of this store, it is stale and rebuilt.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(64 << 30)
            .unwrap();
        assert_eq!(LengthIndex::read_sidecar(&s2).unwrap(), None);
        assert_eq!(LengthIndex::load_or_build(&s2).unwrap().lengths(), &[2]);
        assert!(std::fs::metadata(&path).unwrap().len() < 1024);
    }

    #[test]
    fn zero_lengths_are_refused() {
        assert!(LengthIndex::from_lengths(vec![3u32, 0]).is_err());
        assert_eq!(LengthIndex::from_lengths(vec![3u32, 1]).unwrap().total(), 4);
    }
}
