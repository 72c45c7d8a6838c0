//! Stores on object storage: S3, GCS, Azure and plain HTTP(S), through the
//! [`object_store`] crate (feature `remote`).
//!
//! A store URL is the store directory's address: `s3://bucket/prefix/store`
//! holds `s3://bucket/prefix/store/meta.zr`, `…/data_0.zr` and so on, the
//! same files as a local store. [`Store::open`](crate::Store::open),
//! [`DynDense::open`](crate::DynDense::open),
//! [`DynRagged::open`](crate::DynRagged::open) and the typed opens accept a
//! URL in place of a path and use [`RemoteOptions::from_env`];
//! the `open_url` siblings take explicit [`RemoteOptions`].
//!
//! - **Credentials, region, endpoint** come from each service's standard
//!   environment, exactly as `object_store`'s `from_env` builders read it
//!   (S3: `AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//!   `AWS_REGION`, `AWS_ALLOW_HTTP`, …; GCS: `GOOGLE_*`; Azure: `AZURE_*`),
//!   then from [`RemoteOptions::config`] pairs, which win.
//! - **Open** reads `meta.zr`'s static page and location table once (the
//!   table in parallel ranged reads) and the sizes of the other objects, and
//!   validates them exactly as for a local store: same typed errors, same
//!   limits, nothing sized by an untrusted field.
//! - **One version per open**: every read of an object (`meta.zr`'s page
//!   and table, `dict.zr`, the shards) is pinned to what its HEAD saw
//!   (`If-Match` on a strong ETag, the version id), each response's
//!   validators are compared with the HEAD's, and `meta.zr`'s are checked
//!   again after every other HEAD of the open, so a store replaced while it
//!   is opened or read is an [`ErrorKind::Remote`] naming the object ("the
//!   store changed while it was being read; reopen it"), never a store of
//!   two versions.
//! - **Gathers** turn their records into byte ranges, coalesce neighbours
//!   (a gap of at most [`RemoteOptions::gap_bytes`] is bridged while the
//!   bridged bytes stay below the wanted ones, so no request fetches more than
//!   twice what it delivers; no request exceeds
//!   [`RemoteOptions::max_request_bytes`]), fetch them concurrently (at most
//!   [`RemoteOptions::concurrency`] at a time) and decode into the caller's
//!   buffer as locally.
//! - **Open** bounds the location table by
//!   [`RemoteOptions::max_table_bytes`] before allocating or listing a
//!   request for it (a server may claim any size), reads it in chunks listed
//!   lazily and appends each as it arrives, so the table is held once.
//! - **The block cache** holds fixed-size aligned blocks of the payload
//!   shards, in memory ([`RemoteOptions::memory_cache_bytes`]) and in a
//!   directory ([`RemoteOptions::cache_dir`], `LOADERX_CACHE_DIR`), each with
//!   a size limit and least-recently-used eviction. A published store is
//!   immutable, so blocks are keyed by the store's identity and are never
//!   stale: a hash of its URL (redacted), the block size, the static page,
//!   every validator `open` fetched (size, ETag, last-modified and version
//!   of `meta.zr`, `dict.zr` and every shard) and the store id that
//!   [`push`] writes beside the store ([`STORE_ID_FILE`]), so a store
//!   deleted and re-published with the same shape, even on a plain HTTP
//!   server without validators, is a new identity. The directory tier is
//!   used only when that identity is proven: a store id, or a version or
//!   strong ETag on every object. A store without (copied onto a web server
//!   that sends no validator, or weak ETags only) keeps its blocks in memory
//!   for that open alone: re-written with the same shape, its `meta.zr` is
//!   byte-identical and nothing else tells the two apart. A shard read whose
//!   response names another ETag or version than `open` saw is an
//!   [`ErrorKind::Remote`], never bytes of two stores. Several processes may
//!   share one directory: blocks are written to a fresh temporary file
//!   (created exclusively, never through a link) and renamed into place;
//!   every block file ends in a SHA-256 of the identity, the block's place
//!   and its bytes, checked once per open store, when it first maps the
//!   file, so a damaged, truncated or foreign block is a miss and is
//!   fetched again, as is a block evicted by another process. From then on
//!   a hit reads the map (a bounded table of at most 8192 mapped blocks per
//!   open store; without a memory tier a gather copies straight out of it,
//!   as out of a local store's maps): only the bytes asked for are touched,
//!   and no system call is made. Recency is kept in memory and written to
//!   the directory (the files' modification times, which eviction goes by)
//!   at most every 30 s, before this process evicts and when the store is
//!   dropped, never per read. A block file truncated by a foreign process
//!   while mapped raises `SIGBUS`, as a local store's shard would: loaderx
//!   itself never writes to a block file once it is in place.
//! - **The cache directory** is shared: loaderx owns only its subdirectory
//!   `loaderx-blocks-v1` ([`CACHE_SUBDIR`], with a marker file) and deletes
//!   only block files it named there, so a cache root pointed at a data
//!   directory loses nothing. *Trust model*: whoever can write the cache
//!   directory can serve data to every process that uses it (the checksum
//!   detects damage and mix-ups, not a forger, who can compute it); give it
//!   the permissions of the data itself (the default `0700`-style private
//!   directory, or a group that is trusted with the stores).
//! - **Errors**: every request is retried with exponential backoff
//!   ([`RemoteOptions::retries`], [`RemoteOptions::backoff`],
//!   [`RemoteOptions::retry_timeout`]); what still fails is an
//!   [`ErrorKind::Remote`] naming the object's URL and the record read.
//!   A missing `meta.zr` is [`ErrorKind::NotAStore`], an unpublished one
//!   [`ErrorKind::NotPublished`], as locally. URLs in messages and in a
//!   store's path never carry user information or a query string
//!   ([`crate::redact_url`]), and [`RemoteOptions`]'s `Debug` redacts
//!   secret-bearing configuration values.
//!
//! [`push`] uploads a published local store, [`push_stores`] a set of them
//! as one publication ([`push_stores_with_files`] with small files beside
//! them, such as a converted root's column-name mapping): every target is checked first, then `dict.zr` (a
//! stale one of an earlier aborted push is removed from a store without
//! one), the payload shards (multipart above [`RemoteOptions::part_bytes`],
//! a failed multipart upload aborted) and the store id of every store, and
//! only then every `meta.zr`, each created only if absent (`PutMode::Create`,
//! so two concurrent pushes cannot both publish), so a store whose upload
//! stopped half way never opens. When a `meta.zr` fails, those already
//! written are deleted again, and the error ([`ErrorKind::PushFailed`])
//! names what remains.
//!
//! The sync API drives one internal multi-thread tokio runtime, created on
//! first use (exactly once, whatever threads race); callers never see async.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant, SystemTime};

use bytes::{Bytes, BytesMut};
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path as ObjPath;
use object_store::{
    BackoffConfig, ClientOptions, GetOptions, ObjectMeta, ObjectStore, ObjectStoreExt,
    ObjectStoreScheme, PutMode, PutPayload, RetryConfig,
};
use sha2::{Digest, Sha256};
use url::Url;

use crate::engine::StoreReader;
use crate::engine::blocks::{FastKeys, Geometry, MemoryBlocks, Resident, block_key, block_of_key};
use crate::engine::reader::{
    Region, Shard, check_dict_len, check_meta_len, check_page, check_shard_len, codec_state,
};
use crate::engine::source::{RemoteStats, ShardSource, StagedBytes, Wanted};
use crate::error::{Error, ErrorKind};
use crate::format::{self, DICT_FILE, MAX_DATA_SHARDS, META_FILE, RECORD_LOC_LEN, STATIC_PAGE_LEN};

mod cache;
mod client;
mod dir;
mod object;
mod open;
mod options;
mod push;
mod shards;
#[cfg(test)]
mod tests;

pub use self::cache::CACHE_SUBDIR;
pub(crate) use self::dir::RemoteDir;
pub use self::object::RemoteObject;
pub(crate) use self::open::open;
pub use self::options::{RemoteOptions, STORE_ID_FILE};
pub use self::push::{PushReport, push, push_stores, push_stores_with_files};
// The sibling modules see each other's items through these.
#[allow(clippy::wildcard_imports, unused_imports)]
use self::{cache::*, client::*, dir::*, open::*, options::*, push::*, shards::*};
