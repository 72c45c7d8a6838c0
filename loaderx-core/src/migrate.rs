//! [`migrate`]: rewriting a store into another format generation.

use std::path::Path;

use crate::Generation;
use crate::engine::StoreWriter;
use crate::error::Error;
use crate::format::Schema;
use crate::options::CreateOptions;
use crate::ragged::{DynRagged, DynRaggedWriter};
use crate::store::Store;

/// Logical bytes one step of a Ragged rewrite gathers at most.
const BATCH_BYTES: u64 = 64 << 20;
/// Records one step of a Ragged rewrite gathers at most.
const BATCH_RECORDS: usize = 1 << 16;

/// Rewrites the local store at `src` as a new store at `dst` in the format
/// generation `to`, with the same records, codec, shard count and
/// dictionary, decoding only what must change.
///
/// - A Dense store's records are the same bytes in every generation: the
///   payload shards and the location table are copied verbatim and only the
///   schema is re-encoded.
/// - So are a Ragged store's, between generations with the same width of
///   dimension lengths (2.4.6, 2.8.12 and 2.8.18 all store `u64`).
/// - Between `u64` and `u32` dimension lengths (to or from 2.8.19) every
///   Ragged record's header changes: records are gathered, decoded, given
///   their new header and encoded again, in bounded batches.
///
/// `dst` is created as every store is, published only when complete; a
/// failed migration removes what it made, leaving nothing at `dst`.
///
/// ```
/// use loaderx_core::{Codec, CreateOptions, DynRagged, Generation, RaggedWriter, migrate};
///
/// let dir = tempfile::tempdir()?;
/// let mut w = RaggedWriter::<u16>::create(dir.path().join("old"), 1, Codec::Zstd)?;
/// w.append([vec![1u16, 2, 3], vec![4]])?;
/// w.close()?;
///
/// migrate(dir.path().join("old"), dir.path().join("new"), Generation::V2_8_19)?;
/// let new = DynRagged::open(dir.path().join("new"))?;
/// assert_eq!(new.generation(), Generation::V2_8_19);
/// assert_eq!(new.gather(&[0])?.shape(0), &[3]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
///
/// As [`Store::open`] for `src` (a URL is refused: migrate a local copy);
/// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for a
/// `dst` that is a URL (migrate locally, then `push` it, feature `remote`),
/// before anything is read or written;
/// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for a
/// generation this crate does not write or one that cannot express the
/// store's element type (bfloat16 and float8 into 2.4.6), naming the
/// generation that can, and for a record the target cannot hold (a
/// dimension over `u32::MAX` in 2.8.19);
/// [`ErrorKind::AlreadyExists`](crate::ErrorKind::AlreadyExists) when `dst`
/// exists; the read errors of `src`'s records and the write errors of `dst`.
pub fn migrate(src: impl AsRef<Path>, dst: impl AsRef<Path>, to: Generation) -> Result<(), Error> {
    let (src, dst) = (src.as_ref(), dst.as_ref());
    if crate::is_url(&src.to_string_lossy()) {
        return Err(Error::invalid(format!(
            "{}: migrate reads a local store; copy it here first",
            crate::redact_url(&src.to_string_lossy())
        )));
    }
    if crate::is_url(&dst.to_string_lossy()) {
        return Err(Error::invalid(format!(
            "{}: migrate writes a local store; migrate here, then push it",
            crate::redact_url(&dst.to_string_lossy())
        )));
    }
    let store = Store::open(src)?;
    to.check_writable(store.dtype())?;
    let mut options = CreateOptions::new(store.codec())
        .data_shards(store.data_shards())
        .generation(to);
    let dict = match &store {
        Store::Dense(s) => s.dict(),
        Store::Ragged(s) => s.dict(),
    };
    if let Some(d) = dict {
        options = options.dict_bytes(d);
    }
    match &store {
        Store::Dense(s) => {
            let schema = Schema::dense(s.dtype(), s.item_shape())?;
            copy(one_store(s.engine())?, dst, &schema, &options)
        }
        Store::Ragged(s) if s.generation().dim_width() == to.dim_width() => {
            let schema = Schema::ragged(s.dtype(), s.ndim())?;
            copy(one_store(s.engine())?, dst, &schema, &options)
        }
        Store::Ragged(s) => rewrite_ragged(s, dst, &options),
    }
}

/// The one store `engine` reads (`Store::open` opens one).
fn one_store(engine: &crate::engine::Engine) -> Result<&crate::engine::StoreReader, Error> {
    engine
        .store()
        .ok_or_else(|| Error::invalid("migrate copies one store, not a concatenation"))
}

/// A new store at `dst` holding `src`'s stored bytes under `schema`.
fn copy(
    src: &crate::engine::StoreReader,
    dst: &Path,
    schema: &Schema,
    options: &CreateOptions,
) -> Result<(), Error> {
    let mut w = StoreWriter::create(dst, schema, options)?;
    match w.copy_stored(src) {
        Ok(()) => w.close(),
        Err(e) => {
            drop(w);
            let _ = std::fs::remove_dir_all(dst);
            Err(e)
        }
    }
}

/// A new Ragged store at `dst` of `src`'s records with the headers
/// `options`' generation writes.
fn rewrite_ragged(src: &DynRagged, dst: &Path, options: &CreateOptions) -> Result<(), Error> {
    let mut w = DynRaggedWriter::create(dst, src.dtype(), src.ndim(), options)?;
    let result = (|| {
        let n = src.len();
        let mut next = 0u64;
        let mut ids = Vec::new();
        while next < n {
            ids.clear();
            let mut bytes = 0u64;
            while next < n && ids.len() < BATCH_RECORDS && (ids.is_empty() || bytes < BATCH_BYTES) {
                bytes += u64::from(src.loc(next)?.logic_length);
                ids.push(next);
                next += 1;
            }
            let batch = src.gather(&ids)?;
            w.append_bytes((0..batch.len()).map(|i| (batch.shape(i), batch.bytes(i))))?;
        }
        Ok(())
    })();
    match result {
        Ok(()) => w.close(),
        Err(e) => {
            drop(w);
            let _ = std::fs::remove_dir_all(dst);
            Err(e)
        }
    }
}
