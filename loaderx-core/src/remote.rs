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
//! - **Gathers** turn their records into byte ranges, coalesce neighbours
//!   (a gap of at most [`RemoteOptions::gap_bytes`] is bridged while the
//!   bridged bytes stay below the wanted ones, so no request fetches more than
//!   twice what it delivers; no request exceeds
//!   [`RemoteOptions::max_request_bytes`]), fetch them concurrently (at most
//!   [`RemoteOptions::concurrency`] at a time) and decode into the caller's
//!   buffer as locally.
//! - **The block cache** holds fixed-size aligned blocks of the payload
//!   shards, in memory ([`RemoteOptions::memory_cache_bytes`]) and in a
//!   directory ([`RemoteOptions::cache_dir`], `LOADERX_CACHE_DIR`), each with
//!   a size limit and least-recently-used eviction. A published store is
//!   immutable, so blocks are keyed by the store's identity (its URL, and
//!   the ETag and size of its `meta.zr`) and are never stale. Several
//!   processes may share one directory: blocks are written to a temporary
//!   file and renamed into place, a block of the wrong length is refetched,
//!   and a block evicted by another process is simply fetched again.
//! - **Errors**: every request is retried with exponential backoff
//!   ([`RemoteOptions::retries`], [`RemoteOptions::backoff`],
//!   [`RemoteOptions::retry_timeout`]); what still fails is an
//!   [`ErrorKind::Remote`] naming the object's URL and the record read.
//!   A missing `meta.zr` is [`ErrorKind::NotAStore`], an unpublished one
//!   [`ErrorKind::NotPublished`], as locally.
//!
//! [`push`] uploads a published local store: `dict.zr` and the payload
//! shards first (multipart above [`RemoteOptions::part_bytes`]), `meta.zr`
//! last, so a store whose upload stopped half way never opens.
//!
//! The sync API drives one internal multi-thread tokio runtime, created on
//! first use; callers never see async.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, RwLockReadGuard};
use std::time::{Duration, SystemTime};

use bytes::{Bytes, BytesMut};
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path as ObjPath;
use object_store::{
    BackoffConfig, ClientOptions, ObjectStore, ObjectStoreExt, ObjectStoreScheme, PutPayload,
    RetryConfig, WriteMultipart,
};
use sha2::{Digest, Sha256};
use url::Url;

use crate::codec::Sink;
use crate::engine::StoreReader;
use crate::engine::reader::{
    Region, Shard, check_dict_len, check_meta_len, check_page, check_shard_len, codec_state,
};
use crate::error::{Error, ErrorKind};
use crate::format::{self, DICT_FILE, MAX_DATA_SHARDS, META_FILE, RECORD_LOC_LEN, STATIC_PAGE_LEN};

/// The location table is read in ranged requests of this many bytes.
const TABLE_CHUNK: u64 = 8 << 20;

/// How stores on object storage are reached, fetched and cached.
///
/// [`RemoteOptions::from_env`] is what the plain `open`s use; every setter
/// returns the options for chaining.
#[derive(Debug, Clone)]
pub struct RemoteOptions {
    config: Vec<(String, String)>,
    cache_dir: Option<PathBuf>,
    cache_bytes: u64,
    memory_cache_bytes: u64,
    block_bytes: u64,
    gap_bytes: u64,
    max_request_bytes: u64,
    concurrency: usize,
    part_bytes: usize,
    retries: usize,
    backoff: Duration,
    retry_timeout: Duration,
    timeout: Duration,
    connect_timeout: Duration,
}

impl Default for RemoteOptions {
    /// No cache directory, a 256 MiB memory cache of 256 KiB blocks,
    /// coalescing gaps up to 1 MiB into requests of at most 16 MiB,
    /// 32 requests in flight, 4 retries from a 100 ms backoff within 30 s,
    /// 30 s per request, 5 s to connect.
    fn default() -> Self {
        RemoteOptions {
            config: Vec::new(),
            cache_dir: None,
            cache_bytes: 32 << 30,
            memory_cache_bytes: 256 << 20,
            block_bytes: 256 << 10,
            gap_bytes: 1 << 20,
            max_request_bytes: 16 << 20,
            concurrency: 32,
            part_bytes: 32 << 20,
            retries: 4,
            backoff: Duration::from_millis(100),
            retry_timeout: Duration::from_secs(30),
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
        }
    }
}

impl RemoteOptions {
    /// The defaults, with the cache directory from `LOADERX_CACHE_DIR` and
    /// its size limit in bytes from `LOADERX_CACHE_BYTES` when set.
    /// Credentials and endpoints are read from the environment at open
    /// whatever the options.
    pub fn from_env() -> Self {
        let mut o = RemoteOptions::default();
        if let Some(dir) = std::env::var_os("LOADERX_CACHE_DIR").filter(|d| !d.is_empty()) {
            o.cache_dir = Some(PathBuf::from(dir));
        }
        if let Some(n) = std::env::var("LOADERX_CACHE_BYTES")
            .ok()
            .and_then(|v| v.trim().parse().ok())
        {
            o.cache_bytes = n;
        }
        o
    }

    /// Sets one `object_store` configuration key of the URL's service, as
    /// its builder's `with_config` reads it (`aws_endpoint`,
    /// `aws_access_key_id`, `aws_region`, `aws_allow_http`,
    /// `google_service_account`, `azure_storage_account_name`, …); wins over
    /// the environment.
    pub fn config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.config.push((key.into(), value.into()));
        self
    }

    /// The block cache directory (`None`: memory only).
    pub fn cache_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.cache_dir = dir;
        self
    }

    /// Size limit of the cache directory, all stores together.
    pub fn cache_bytes(mut self, bytes: u64) -> Self {
        self.cache_bytes = bytes;
        self
    }

    /// Size limit of the memory cache of each open store (0: none).
    pub fn memory_cache_bytes(mut self, bytes: u64) -> Self {
        self.memory_cache_bytes = bytes;
        self
    }

    /// Disables both caches: every gather fetches exactly its coalesced ranges.
    pub fn no_cache(mut self) -> Self {
        self.cache_dir = None;
        self.memory_cache_bytes = 0;
        self
    }

    /// Cache block size (at least 4 KiB).
    pub fn block_bytes(mut self, bytes: u64) -> Self {
        self.block_bytes = bytes.max(4096);
        self
    }

    /// Largest gap between two wanted ranges that one request bridges.
    pub fn gap_bytes(mut self, bytes: u64) -> Self {
        self.gap_bytes = bytes;
        self
    }

    /// Largest request; a single record larger than this is still one request.
    pub fn max_request_bytes(mut self, bytes: u64) -> Self {
        self.max_request_bytes = bytes.max(1);
        self
    }

    /// Requests in flight at once, per gather (at least 1).
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// Part size of multipart uploads by [`push`] (at least 5 MiB, the S3
    /// minimum); smaller objects are one request.
    pub fn part_bytes(mut self, bytes: usize) -> Self {
        self.part_bytes = bytes.max(5 << 20);
        self
    }

    /// Retries of a failed request (0: none).
    pub fn retries(mut self, n: usize) -> Self {
        self.retries = n;
        self
    }

    /// First backoff between retries; it doubles up to 16 times this.
    pub fn backoff(mut self, d: Duration) -> Self {
        self.backoff = d;
        self
    }

    /// No retry starts later than this after a request's first attempt.
    pub fn retry_timeout(mut self, d: Duration) -> Self {
        self.retry_timeout = d;
        self
    }

    /// Limit on one request, and on establishing its connection.
    pub fn timeouts(mut self, request: Duration, connect: Duration) -> Self {
        self.timeout = request;
        self.connect_timeout = connect;
        self
    }
}

/// Requests and bytes a remote store has fetched since it was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoteStats {
    /// Ranged GET requests for payload bytes (retries not counted).
    pub requests: u64,
    /// Payload bytes those requests returned.
    pub bytes_fetched: u64,
    /// Cache blocks served from memory.
    pub memory_hits: u64,
    /// Cache blocks served from the cache directory.
    pub disk_hits: u64,
    /// Cache blocks fetched.
    pub misses: u64,
}

/// The internal runtime that drives `object_store`.
fn runtime() -> Result<&'static tokio::runtime::Runtime, Error> {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    if let Some(rt) = RT.get() {
        return Ok(rt);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .thread_name("loaderx-remote")
        .enable_all()
        .build()
        .map_err(|e| Error::io("loaderx remote runtime", e))?;
    Ok(RT.get_or_init(|| rt))
}

/// Runs `f` to completion on the internal runtime; from inside another
/// tokio runtime, on a helper thread (blocking there would panic).
fn block_on<F>(f: F) -> Result<F::Output, Error>
where
    F: Future + Send,
    F::Output: Send,
{
    let rt = runtime()?;
    if tokio::runtime::Handle::try_current().is_ok() {
        return std::thread::scope(|s| s.spawn(|| rt.block_on(f)).join())
            .map_err(|_| Error::invalid("the remote fetch thread panicked"));
    }
    Ok(rt.block_on(f))
}

/// A store URL split into its object store and the store's prefix in it.
struct Target {
    store: Arc<dyn ObjectStore>,
    prefix: ObjPath,
    /// The URL without a trailing slash, for messages.
    url: String,
}

impl Target {
    fn object(&self, name: &str) -> ObjPath {
        self.prefix.clone().join(name)
    }

    fn url_of(&self, name: &str) -> PathBuf {
        PathBuf::from(format!("{}/{name}", self.url))
    }

    fn err(&self, name: &str, record: Option<u64>, e: impl std::fmt::Display) -> Error {
        ErrorKind::Remote {
            path: self.url_of(name),
            record,
            detail: e.to_string(),
        }
        .into()
    }
}

fn target(url: &str, o: &RemoteOptions) -> Result<Target, Error> {
    let trimmed = url.trim_end_matches('/');
    let bad = |e: &dyn std::fmt::Display| Error::invalid(format!("{url}: not a store URL: {e}"));
    let parsed = Url::parse(trimmed).map_err(|e| bad(&e))?;
    let (scheme, prefix) = ObjectStoreScheme::parse(&parsed).map_err(|e| bad(&e))?;
    let retry = RetryConfig {
        backoff: BackoffConfig {
            init_backoff: o.backoff,
            max_backoff: o.backoff.saturating_mul(16),
            base: 2.0,
        },
        max_retries: o.retries,
        retry_timeout: o.retry_timeout,
    };
    let client = ClientOptions::new()
        .with_timeout(o.timeout)
        .with_connect_timeout(o.connect_timeout)
        .with_allow_http(parsed.scheme() == "http");
    let build_err = |e: object_store::Error| bad(&e);
    let store: Arc<dyn ObjectStore> = match scheme {
        ObjectStoreScheme::AmazonS3 => {
            use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey as K};
            let b = AmazonS3Builder::new().with_client_options(client);
            let b = env_then_config(b, "AWS_", &o.config, |b, k, v| {
                Ok(b.with_config(k.parse::<K>().map_err(|e| e.to_string())?, v))
            })?;
            Arc::new(
                b.with_url(trimmed)
                    .with_retry(retry)
                    .build()
                    .map_err(build_err)?,
            )
        }
        ObjectStoreScheme::GoogleCloudStorage => {
            use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey as K};
            let b = GoogleCloudStorageBuilder::new().with_client_options(client);
            let b = env_then_config(b, "GOOGLE_", &o.config, |b, k, v| {
                Ok(b.with_config(k.parse::<K>().map_err(|e| e.to_string())?, v))
            })?;
            Arc::new(
                b.with_url(trimmed)
                    .with_retry(retry)
                    .build()
                    .map_err(build_err)?,
            )
        }
        ObjectStoreScheme::MicrosoftAzure => {
            use object_store::azure::{AzureConfigKey as K, MicrosoftAzureBuilder};
            let b = MicrosoftAzureBuilder::new().with_client_options(client);
            let b = env_then_config(b, "AZURE_", &o.config, |b, k, v| {
                Ok(b.with_config(k.parse::<K>().map_err(|e| e.to_string())?, v))
            })?;
            Arc::new(
                b.with_url(trimmed)
                    .with_retry(retry)
                    .build()
                    .map_err(build_err)?,
            )
        }
        ObjectStoreScheme::Http => {
            use object_store::ClientConfigKey as K;
            use object_store::http::HttpBuilder;
            let b = HttpBuilder::new().with_client_options(client);
            let b = env_then_config(b, "\0", &o.config, |b, k, v| {
                Ok(b.with_config(k.parse::<K>().map_err(|e| e.to_string())?, v))
            })?;
            Arc::new(
                b.with_url(&parsed[..url::Position::BeforePath])
                    .with_retry(retry)
                    .build()
                    .map_err(build_err)?,
            )
        }
        _ => return Err(bad(&"scheme is not s3, gs, az or http(s)")),
    };
    Ok(Target {
        store,
        prefix,
        url: trimmed.to_string(),
    })
}

/// Applies the service's `prefix*` environment variables whose keys the
/// builder knows (as its `from_env` does), then `config`, whose keys must be
/// known. `set` is tried on a clone, so an unknown key leaves the builder.
fn env_then_config<B: Clone>(
    mut b: B,
    prefix: &str,
    config: &[(String, String)],
    set: impl Fn(B, &str, &str) -> Result<B, String>,
) -> Result<B, Error> {
    for (k, v) in std::env::vars_os() {
        if let (Some(k), Some(v)) = (k.to_str(), v.to_str())
            && k.starts_with(prefix)
            && let Ok(next) = set(b.clone(), &k.to_ascii_lowercase(), v)
        {
            b = next;
        }
    }
    for (k, v) in config {
        b = set(b, &k.to_ascii_lowercase(), v)
            .map_err(|e| Error::invalid(format!("remote option {k}: {e}")))?;
    }
    Ok(b)
}

/// Opens and validates the store at `url`.
pub(crate) fn open(url: &str, o: &RemoteOptions) -> Result<StoreReader, Error> {
    open_target(target(url, o)?, o)
}

/// Opens and validates the store that `t` addresses.
fn open_target(t: Target, o: &RemoteOptions) -> Result<StoreReader, Error> {
    let path = PathBuf::from(&t.url);
    let meta_obj = t.object(META_FILE);
    let (meta_len, etag, page) = block_on(async {
        let head = match t.store.head(&meta_obj).await {
            Ok(h) => h,
            Err(object_store::Error::NotFound { .. }) => {
                return Err(ErrorKind::NotAStore { path: path.clone() }.into());
            }
            Err(e) => return Err(t.err(META_FILE, None, e)),
        };
        check_meta_len(&path, head.size)?;
        let raw = t
            .store
            .get_range(&meta_obj, 0..STATIC_PAGE_LEN as u64)
            .await
            .map_err(|e| t.err(META_FILE, None, e))?;
        let tag = head
            .e_tag
            .clone()
            .unwrap_or_else(|| head.last_modified.to_rfc3339());
        Ok::<_, Error>((head.size, tag, raw))
    })??;
    let mut raw = [0u8; STATIC_PAGE_LEN];
    if page.len() != STATIC_PAGE_LEN {
        return Err(Error::corrupt(
            path.join(META_FILE),
            format!("a read of the static page returned {} bytes", page.len()),
        ));
    }
    raw.copy_from_slice(&page);
    let checked = check_page(&path, meta_len, &raw)?;
    let shard_count = checked.shard_count;
    let table_end = checked.table_end;
    // Everything else at once: the table in chunks, the sizes of the dictionary and shards.
    let (table, dict_len, shard_lens) = block_on(async {
        let chunks: Vec<_> = (STATIC_PAGE_LEN as u64..table_end)
            .step_by(TABLE_CHUNK as usize)
            .map(|a| a..table_end.min(a + TABLE_CHUNK))
            .collect();
        let table = futures::stream::iter(chunks)
            .map(|r| {
                let meta_obj = &meta_obj;
                let t = &t;
                async move {
                    let want = r.end - r.start;
                    let b = t
                        .store
                        .get_range(meta_obj, r)
                        .await
                        .map_err(|e| t.err(META_FILE, None, e))?;
                    if b.len() as u64 != want {
                        return Err(Error::corrupt(
                            t.url_of(META_FILE),
                            format!("a read of {want} table bytes returned {}", b.len()),
                        ));
                    }
                    Ok::<_, Error>(b)
                }
            })
            .buffered(o.concurrency)
            .try_collect::<Vec<Bytes>>();
        let dict = async {
            match t.store.head(&t.object(DICT_FILE)).await {
                Ok(h) => Ok(Some(h.size)),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(t.err(DICT_FILE, None, e)),
            }
        };
        let shards = futures::stream::iter(0..shard_count)
            .map(|s| {
                let t = &t;
                async move {
                    let name = format::data_file(s);
                    match t.store.head(&t.object(&name)).await {
                        Ok(h) => Ok(Some(h.size)),
                        Err(object_store::Error::NotFound { .. }) => Ok(None),
                        Err(e) => Err(t.err(&name, None, e)),
                    }
                }
            })
            .buffered(o.concurrency)
            .try_collect::<Vec<Option<u64>>>();
        futures::try_join!(table, dict, shards)
    })??;
    check_dict_len(&path, checked.codec, dict_len)?;
    let dict = match dict_len {
        None => None,
        Some(len) => {
            let d = block_on(t.store.get_range(&t.object(DICT_FILE), 0..len))?
                .map_err(|e| t.err(DICT_FILE, None, e))?;
            if d.len() as u64 != len {
                return Err(Error::corrupt(
                    path.join(DICT_FILE),
                    format!("dict.zr is {len} bytes but a read returned {}", d.len()),
                ));
            }
            Some(d.to_vec())
        }
    };
    let codec = codec_state(&path, checked.codec, dict.as_deref())?;
    let mut shards = Vec::with_capacity(shard_count);
    let mut tails = Vec::with_capacity(shard_count);
    for (s, len) in shard_lens.iter().enumerate() {
        let p = path.join(format::data_file(s));
        let tail = checked.page.tails[s];
        let Some(len) = *len else {
            return Err(Error::corrupt(&p, "payload shard is missing"));
        };
        check_shard_len(&p, len, tail)?;
        shards.push(Shard::remote(tail));
        tails.push(tail);
    }
    let mut bytes = Vec::with_capacity(table_end as usize);
    bytes.extend_from_slice(&raw);
    for chunk in &table {
        bytes.extend_from_slice(chunk);
    }
    let identity = {
        let mut h = Sha256::new();
        h.update(t.url.as_bytes());
        h.update([0]);
        h.update(etag.as_bytes());
        h.update([0]);
        h.update(meta_len.to_le_bytes());
        let d = h.finalize();
        d[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    let cache = BlockCache::new(o, &identity)?;
    let remote = RemoteShards {
        inner: Arc::new(Inner {
            target: t,
            tails,
            cache,
            opts: o.clone(),
            stats: Counters::default(),
        }),
    };
    let table = (!bytes.is_empty()).then_some(Region::Heap(bytes));
    Ok(StoreReader::assemble(&path, None, table, checked, shards, codec, dict).with_remote(remote))
}

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    bytes: AtomicU64,
    memory_hits: AtomicU64,
    disk_hits: AtomicU64,
    misses: AtomicU64,
}

struct Inner {
    target: Target,
    tails: Vec<u64>,
    cache: Option<BlockCache>,
    opts: RemoteOptions,
    stats: Counters,
}

/// The payload shards of a remote store, with their block cache.
#[derive(Clone)]
pub(crate) struct RemoteShards {
    inner: Arc<Inner>,
}

/// Stored bytes fetched for one gather.
pub(crate) enum Fetched {
    /// Contiguous pieces of the shards, `(shard, start, bytes)`, sorted by
    /// shard and start, disjoint: what the general path assembles.
    Pieces(Vec<(usize, u64, Bytes)>),
    /// Every block the gather touches, each from the memory tier (no copy),
    /// by [`block_key`]; each record that straddles blocks has a piece of
    /// its own in `stitched`, `(shard, start, bytes)` sorted by shard,
    /// start and length (pieces of different records may overlap).
    Blocks {
        /// How offsets map to blocks.
        geometry: Geometry,
        /// The blocks, by [`block_key`].
        blocks: HashMap<u64, Bytes, FastKeys>,
        /// The straddling records' stored bytes.
        stitched: Vec<(usize, u64, Bytes)>,
    },
}

/// The `len` bytes at `offset` of shard `s` from `pieces`, sorted by shard
/// and start, if the last piece starting at or before `offset` holds them.
fn pieces_get(pieces: &[(usize, u64, Bytes)], s: usize, offset: u64, len: u32) -> Option<&[u8]> {
    let k = pieces
        .partition_point(|p| (p.0, p.1) <= (s, offset))
        .checked_sub(1)?;
    let (ps, start, bytes) = &pieces[k];
    if *ps != s {
        return None;
    }
    // Same shard and sorted: `start <= offset`.
    let at = usize::try_from(offset - start).ok()?;
    bytes.get(at..at.checked_add(len as usize)?)
}

impl Fetched {
    /// The `len` bytes at `offset` of shard `s`, if fetched.
    pub(crate) fn get(&self, s: usize, offset: u64, len: u32) -> Option<&[u8]> {
        match self {
            Fetched::Pieces(pieces) => pieces_get(pieces, s, offset, len),
            Fetched::Blocks {
                geometry,
                blocks,
                stitched,
            } => {
                let (b, at) = geometry.split(offset);
                blocks
                    .get(&block_key(s, b))
                    .and_then(|block| block.get(at..at.checked_add(len as usize)?))
                    .or_else(|| pieces_get(stitched, s, offset, len))
            }
        }
    }
}

/// How shard offsets map to cache blocks: block `b` of a shard holds its
/// bytes `[b * bytes, (b + 1) * bytes)` (the last block up to the tail).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geometry {
    /// Block size, at least 4096.
    bytes: u64,
    /// `log2(bytes)` when it is a power of two (the default is), so that
    /// [`Geometry::split`] is a shift and a mask instead of a division.
    shift: Option<u32>,
}

impl Geometry {
    fn new(bytes: u64) -> Geometry {
        let bytes = bytes.max(1);
        Geometry {
            bytes,
            shift: bytes.is_power_of_two().then(|| bytes.trailing_zeros()),
        }
    }

    /// The block holding shard offset `offset`, and where in it.
    #[inline(always)]
    fn split(self, offset: u64) -> (u64, usize) {
        match self.shift {
            Some(shift) => (offset >> shift, (offset & (self.bytes - 1)) as usize),
            None => (offset / self.bytes, (offset % self.bytes) as usize),
        }
    }
}

/// The key of block `b` of shard `s` in the memory tier. Shards number at
/// most [`MAX_DATA_SHARDS`] (255, a `u8` in the header) and a block number
/// is below 2^52 (offsets are `u64`, blocks at least 4096 bytes), so the
/// key is unique.
#[inline(always)]
fn block_key(s: usize, b: u64) -> u64 {
    debug_assert!(s < 256);
    (b << 8) | (s as u64 & 0xff)
}

/// Hashes the memory tier's `u64` block keys: one multiply by the 64-bit
/// golden ratio (Fibonacci hashing), whose high bits depend on every bit of
/// the key, folded into the low bits that pick a bucket. std's SipHash costs
/// several times more, to resist keys chosen to collide; these are block
/// numbers of the store's own shards (consecutive integers, which this
/// spreads evenly), and a collision costs a probe, never a wrong block.
#[derive(Default, Clone, Copy)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    #[inline(always)]
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0 ^ x).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    #[inline(always)]
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }
}

/// Builds [`KeyHasher`]s.
pub(crate) type FastKeys = BuildHasherDefault<KeyHasher>;

/// The memory tier read-locked for one gather (or one part of a parallel
/// one), with that gather's tick: [`Resident::copy`] copies records straight
/// out of its blocks.
///
/// The lock is shared: other gathers read on, and a put (of a block another
/// gather fetched) waits until this one is dropped. Drop it before taking
/// the general path, whose puts lock the tier for writing.
pub(crate) struct Resident<'a> {
    memory: RwLockReadGuard<'a, MemoryCache>,
    tick: u64,
    geometry: Geometry,
}

/// What [`Resident::copy`] did.
pub(crate) enum Copied {
    /// Every byte of the destination was written.
    Done,
    /// A block is not in memory (some bytes may have been written).
    Miss,
    /// The bytes run past the end of their shard's last block.
    Outside,
}

impl Resident<'_> {
    /// The gather's tick, for the other parts of a parallel gather.
    pub(crate) fn tick(&self) -> u64 {
        self.tick
    }

    /// Copies the `dst.len()` stored bytes at `offset` of shard `s` into
    /// `dst`, a record straddling blocks piece by piece; adds to `hits` each
    /// block this gather touches for the first time.
    #[inline(always)]
    pub(crate) fn copy<D: Sink>(
        &self,
        s: usize,
        offset: u64,
        dst: &mut [D],
        hits: &mut u64,
    ) -> Copied {
        let (mut b, mut at) = self.geometry.split(offset);
        let Some((mut block, first)) = self.memory.touch(block_key(s, b), self.tick) else {
            return Copied::Miss;
        };
        *hits += u64::from(first);
        if let Some(src) = block.get(at..at.wrapping_add(dst.len())) {
            D::put(dst, src);
            return Copied::Done;
        }
        // Straddles blocks (or runs past the last one): piece by piece.
        let mut done = 0;
        loop {
            let n = block.len().saturating_sub(at).min(dst.len() - done);
            let (Some(src), Some(d)) = (block.get(at..at + n), dst.get_mut(done..done + n)) else {
                return Copied::Outside;
            };
            if n == 0 {
                return Copied::Outside;
            }
            D::put(d, src);
            done += n;
            if done == dst.len() {
                return Copied::Done;
            }
            b += 1;
            at = 0;
            let Some((next, first)) = self.memory.touch(block_key(s, b), self.tick) else {
                return Copied::Miss;
            };
            *hits += u64::from(first);
            block = next;
        }
    }
}

/// A coalesced run of wanted bytes of one shard.
struct Segment {
    shard: usize,
    start: u64,
    end: u64,
    /// The first record it holds, for error messages.
    record: u64,
}

impl RemoteShards {
    /// What was fetched so far.
    pub(crate) fn stats(&self) -> RemoteStats {
        let c = &self.inner.stats;
        RemoteStats {
            requests: c.requests.load(Ordering::Relaxed),
            bytes_fetched: c.bytes.load(Ordering::Relaxed),
            memory_hits: c.memory_hits.load(Ordering::Relaxed),
            disk_hits: c.disk_hits.load(Ordering::Relaxed),
            misses: c.misses.load(Ordering::Relaxed),
        }
    }

    /// Fetches the stored bytes of `(record, shard, offset, length)`, every
    /// one within its shard's committed tail.
    pub(crate) fn fetch(&self, mut wanted: Vec<(u64, usize, u64, u32)>) -> Result<Fetched, Error> {
        let inner = &*self.inner;
        let o = &inner.opts;
        // Warm: every block in the memory tier. The blocks themselves are
        // what was fetched; no ranges, no copies but of straddling records.
        if let Some(cache) = &inner.cache
            && let Some((fetched, hits)) = cache.resident(&wanted)
        {
            self.count_memory_hits(hits);
            return Ok(fetched);
        }
        wanted.sort_unstable_by_key(|w| (w.1, w.2));
        // With a cache, requests are made of blocks: cap segments only then.
        let cap = match inner.cache {
            Some(_) => u64::MAX,
            None => o.max_request_bytes,
        };
        let mut segments: Vec<Segment> = Vec::new();
        let mut useful = 0u64;
        for &(record, shard, offset, len) in &wanted {
            let end = offset + u64::from(len);
            if let Some(seg) = segments.last_mut()
                && seg.shard == shard
            {
                if offset <= seg.end {
                    // Overlapping or adjacent (aliased records share bytes).
                    useful += end.saturating_sub(seg.end);
                    seg.end = seg.end.max(end);
                    continue;
                }
                let gap = offset - seg.end;
                let waste = (seg.end - seg.start) - useful;
                if gap <= o.gap_bytes
                    && waste + gap <= useful + u64::from(len)
                    && end - seg.start <= cap
                {
                    useful += u64::from(len);
                    seg.end = end;
                    continue;
                }
            }
            useful = u64::from(len);
            segments.push(Segment {
                shard,
                start: offset,
                end,
                record,
            });
        }
        let pieces = match &inner.cache {
            None => self.fetch_segments(&segments)?,
            Some(cache) => self.fetch_blocks(cache, &segments)?,
        };
        Ok(Fetched::Pieces(pieces))
    }

    /// The memory tier read-locked, for a gather that copies straight out of
    /// it; `tick` is the gather's when this is one part of a parallel one,
    /// `None` to start a new gather. `None` without a memory tier.
    pub(crate) fn resident(&self, tick: Option<u64>) -> Option<Resident<'_>> {
        let cache = self.inner.cache.as_ref()?;
        let memory = cache.memory.as_ref()?.read().ok()?;
        let tick = tick.unwrap_or_else(|| memory.next_tick());
        Some(Resident {
            memory,
            tick,
            geometry: cache.geometry,
        })
    }

    /// Counts `n` blocks served from memory.
    pub(crate) fn count_memory_hits(&self, n: u64) {
        self.inner.stats.memory_hits.fetch_add(n, Ordering::Relaxed);
    }

    /// One request per segment.
    fn fetch_segments(&self, segments: &[Segment]) -> Result<Vec<(usize, u64, Bytes)>, Error> {
        let requests = segments
            .iter()
            .map(|s| (s.shard, s.start..s.end, s.record))
            .collect();
        self.get_ranges(requests)
    }

    /// Ranged GETs of `(shard, range, record)`, concurrently; each result
    /// has exactly the range's length.
    fn get_ranges(
        &self,
        requests: Vec<(usize, std::ops::Range<u64>, u64)>,
    ) -> Result<Vec<(usize, u64, Bytes)>, Error> {
        if requests.is_empty() {
            return Ok(Vec::new());
        }
        let inner = &*self.inner;
        let t = &inner.target;
        let fut = futures::stream::iter(requests)
            .map(|(s, r, record)| async move {
                let name = format::data_file(s);
                let want = r.end - r.start;
                let start = r.start;
                let b = t
                    .store
                    .get_range(&t.object(&name), r)
                    .await
                    .map_err(|e| t.err(&name, Some(record), e))?;
                inner.stats.requests.fetch_add(1, Ordering::Relaxed);
                inner
                    .stats
                    .bytes
                    .fetch_add(b.len() as u64, Ordering::Relaxed);
                if b.len() as u64 != want {
                    return Err(t.err(
                        &name,
                        Some(record),
                        format!("a read of {want} bytes returned {}", b.len()),
                    ));
                }
                Ok::<_, Error>((s, start, b))
            })
            .buffer_unordered(inner.opts.concurrency)
            .try_collect::<Vec<_>>();
        let mut out = block_on(fut)??;
        out.sort_unstable_by_key(|p| (p.0, p.1));
        Ok(out)
    }

    /// Segments assembled from cache blocks, fetching the missing ones.
    fn fetch_blocks(
        &self,
        cache: &BlockCache,
        segments: &[Segment],
    ) -> Result<Vec<(usize, u64, Bytes)>, Error> {
        let inner = &*self.inner;
        let bs = cache.geometry.bytes;
        let block_len = |s: usize, b: u64| bs.min(inner.tails[s] - b * bs);
        // Every block the segments touch, with a record for messages.
        let mut blocks: BTreeMap<(usize, u64), u64> = BTreeMap::new();
        for seg in segments {
            for b in seg.start / bs..seg.end.div_ceil(bs) {
                blocks.entry((seg.shard, b)).or_insert(seg.record);
            }
        }
        let mut have: HashMap<(usize, u64), Hit> = HashMap::with_capacity(blocks.len());
        let mut missing: Vec<(usize, u64, u64)> = Vec::new();
        let keys: Vec<(usize, u64, u64)> = blocks
            .keys()
            .map(|&(s, b)| (s, b, block_len(s, b)))
            .collect();
        for ((&(s, b), &record), hit) in blocks.iter().zip(cache.get_many(&keys)) {
            match hit {
                Some(hit) => {
                    let c = match hit {
                        Hit::Memory(_) => &inner.stats.memory_hits,
                        Hit::Disk(_) | Hit::File(_) => &inner.stats.disk_hits,
                    };
                    c.fetch_add(1, Ordering::Relaxed);
                    have.insert((s, b), hit);
                }
                None => missing.push((s, b, record)),
            }
        }
        inner
            .stats
            .misses
            .fetch_add(missing.len() as u64, Ordering::Relaxed);
        // Runs of consecutive missing blocks, one request each (capped).
        let per_request = (inner.opts.max_request_bytes / bs).max(1);
        let mut requests: Vec<(usize, std::ops::Range<u64>, u64)> = Vec::new();
        // (shard, first block, last block, record)
        let mut run: Option<(usize, u64, u64, u64)> = None;
        for &(s, b, record) in &missing {
            if let Some((rs, first, last, _)) = &mut run
                && *rs == s
                && *last + 1 == b
                && b - *first < per_request
            {
                *last = b;
                continue;
            }
            if let Some((rs, first, last, rec)) = run.take() {
                requests.push((rs, first * bs..(last * bs + block_len(rs, last)), rec));
            }
            run = Some((s, b, b, record));
        }
        if let Some((rs, first, last, rec)) = run {
            requests.push((rs, first * bs..(last * bs + block_len(rs, last)), rec));
        }
        for (s, start, bytes) in self.get_ranges(requests)? {
            let mut at = 0u64;
            while at < bytes.len() as u64 {
                let b = (start + at) / bs;
                let len = block_len(s, b);
                let block = bytes.slice(at as usize..(at + len) as usize);
                cache.put(s, b, &block);
                have.insert((s, b), Hit::Memory(block));
                at += len;
            }
        }
        let mut pieces = Vec::with_capacity(segments.len());
        for seg in segments {
            let (b0, b1) = (seg.start / bs, (seg.end - 1) / bs);
            let block = |b: u64| {
                have.get(&(seg.shard, b)).ok_or_else(|| {
                    let name = format::data_file(seg.shard);
                    inner.target.err(&name, Some(seg.record), "block missing")
                })
            };
            let piece = match block(b0)? {
                Hit::Memory(bytes) | Hit::Disk(bytes) if b0 == b1 => {
                    let off = seg.start - b0 * bs;
                    bytes.slice(off as usize..(off + seg.end - seg.start) as usize)
                }
                _ => {
                    let mut buf = BytesMut::with_capacity((seg.end - seg.start) as usize);
                    for b in b0..=b1 {
                        let len = block_len(seg.shard, b);
                        let lo = seg.start.max(b * bs) - b * bs;
                        let hi = seg.end.min(b * bs + len) - b * bs;
                        match block(b)? {
                            Hit::Memory(bytes) | Hit::Disk(bytes) => {
                                buf.extend_from_slice(&bytes[lo as usize..hi as usize]);
                            }
                            // Only the wanted bytes of a block read from disk.
                            Hit::File(f) => {
                                let at = buf.len();
                                buf.resize(at + (hi - lo) as usize, 0);
                                f.read_exact_at(&mut buf[at..], lo)
                                    .map_err(|e| Error::io(cache.file_path(seg.shard, b), e))?;
                            }
                        }
                    }
                    buf.freeze()
                }
            };
            pieces.push((seg.shard, seg.start, piece));
        }
        Ok(pieces)
    }
}

/// The block cache of one open store: memory, then directory.
struct BlockCache {
    geometry: Geometry,
    /// Read-locked by lookups (gathers run side by side), write-locked by puts.
    memory: Option<RwLock<MemoryCache>>,
    disk: Option<DiskCache>,
}

impl BlockCache {
    fn new(o: &RemoteOptions, identity: &str) -> Result<Option<BlockCache>, Error> {
        let memory = (o.memory_cache_bytes > 0).then(|| {
            RwLock::new(MemoryCache {
                limit: o.memory_cache_bytes,
                ..MemoryCache::default()
            })
        });
        let disk = match &o.cache_dir {
            Some(root) => Some(DiskCache::new(root, identity, o.cache_bytes)?),
            None => None,
        };
        if memory.is_none() && disk.is_none() {
            return Ok(None);
        }
        Ok(Some(BlockCache {
            geometry: Geometry::new(o.block_bytes),
            memory,
            disk,
        }))
    }

    /// Blocks `(s, b, len)` (block `b` of shard `s`, `len` bytes long), in
    /// order, `None` where not cached. The memory tier is read-locked once
    /// for the whole list. From the directory a block is read whole and kept
    /// in memory when there is a memory tier; without one, only its open
    /// file is returned, and a gather reads just the bytes it needs from it.
    fn get_many(&self, keys: &[(usize, u64, u64)]) -> Vec<Option<Hit>> {
        let mut hits: Vec<Option<Hit>> = match self.memory.as_ref().and_then(|m| m.read().ok()) {
            Some(m) => {
                let tick = m.next_tick();
                keys.iter()
                    .map(|&(s, b, _)| {
                        m.touch(block_key(s, b), tick)
                            .map(|(bytes, _)| Hit::Memory(bytes.clone()))
                    })
                    .collect()
            }
            None => keys.iter().map(|_| None).collect(),
        };
        let Some(disk) = &self.disk else {
            return hits;
        };
        for (hit, &(s, b, len)) in hits.iter_mut().zip(keys) {
            if hit.is_some() {
                continue;
            }
            *hit = match &self.memory {
                None => disk.open(s, b, len).map(Hit::File),
                Some(m) => disk.get(s, b, len).map(|bytes| {
                    if let Ok(mut m) = m.write() {
                        m.put(s, b, bytes.clone());
                    }
                    Hit::Disk(bytes)
                }),
            };
        }
        hits
    }

    /// The memory tier's blocks holding every `(record, shard, offset,
    /// length)` of `wanted`, with how many blocks that is (the memory hits);
    /// `None` when one is not in memory (the general path then fetches what
    /// is missing). The tier is read-locked while the blocks are looked up
    /// (each once, however many records it holds), not while the gather
    /// decodes. The stored bytes of a record straddling blocks are copied
    /// into a piece of their own (a fraction of a percent of records with
    /// the default 256 KiB blocks).
    fn resident(&self, wanted: &[(u64, usize, u64, u32)]) -> Option<(Fetched, u64)> {
        let g = self.geometry;
        let m = self.memory.as_ref()?.read().ok()?;
        let tick = m.next_tick();
        let mut blocks: HashMap<u64, Bytes, FastKeys> = HashMap::with_capacity_and_hasher(
            wanted.len().min(m.blocks.len()),
            FastKeys::default(),
        );
        let mut straddling: Vec<(usize, u64, u32)> = Vec::new();
        for &(_, s, offset, len) in wanted {
            let (b0, _) = g.split(offset);
            let (b1, last) = g.split(offset.checked_add(u64::from(len).max(1) - 1)?);
            for b in b0..=b1 {
                let key = block_key(s, b);
                let block = match blocks.entry(key) {
                    Entry::Occupied(o) => o.into_mut(),
                    Entry::Vacant(v) => v.insert(m.touch(key, tick)?.0.clone()),
                };
                // Past the end of a shard's last block: the general path's.
                if b == b1 && block.len() <= last {
                    return None;
                }
            }
            if b1 != b0 {
                straddling.push((s, offset, len));
            }
        }
        drop(m);
        // Sorted by shard, start and length, as `pieces_get` finds them: of
        // aliased records at one offset, the longest comes last.
        straddling.sort_unstable();
        straddling.dedup();
        let mut stitched = Vec::with_capacity(straddling.len());
        for (s, offset, len) in straddling {
            let len = len as usize;
            let mut buf = BytesMut::with_capacity(len);
            let (mut b, mut at) = g.split(offset);
            while buf.len() < len {
                let block = blocks.get(&block_key(s, b))?;
                let n = block.len().saturating_sub(at).min(len - buf.len());
                // A block short of the record: the general path decides.
                let src = block.get(at..at + n).filter(|src| !src.is_empty())?;
                buf.extend_from_slice(src);
                b += 1;
                at = 0;
            }
            stitched.push((s, offset, buf.freeze()));
        }
        let hits = blocks.len() as u64;
        Some((
            Fetched::Blocks {
                geometry: g,
                blocks,
                stitched,
            },
            hits,
        ))
    }

    /// The file of block `b` of shard `s`, for messages.
    fn file_path(&self, s: usize, b: u64) -> PathBuf {
        self.disk
            .as_ref()
            .map_or_else(PathBuf::new, |d| d.file(s, b))
    }

    fn put(&self, s: usize, b: u64, bytes: &Bytes) {
        if let Some(m) = &self.memory
            && let Ok(mut m) = m.write()
        {
            m.put(s, b, bytes.clone());
        }
        if let Some(d) = &self.disk {
            d.put(s, b, bytes);
        }
    }
}

/// A cached block.
enum Hit {
    /// From the memory tier.
    Memory(Bytes),
    /// Read whole from the directory.
    Disk(Bytes),
    /// Open in the directory, to be read in part.
    File(File),
}

/// A block in the memory tier.
struct Cached {
    /// The tick of its last use: stored under the shared lock, so atomic.
    stamp: AtomicU64,
    bytes: Bytes,
}

/// Blocks in memory, least recently used evicted first.
///
/// A hit only stamps its block with its gather's tick (O(1), once per block
/// and gather, under the shared lock: an atomic store, done only when the
/// stamp changes); eviction, which is rare, sorts the blocks by their stamps
/// and drops the oldest until an eighth of the limit is free, so its cost is
/// spread over the puts that filled that eighth.
#[derive(Default)]
struct MemoryCache {
    limit: u64,
    used: u64,
    /// The last tick handed out: one per gather and one per put.
    tick: AtomicU64,
    /// Block (by [`block_key`]) → last use and bytes.
    blocks: HashMap<u64, Cached, FastKeys>,
}

impl MemoryCache {
    /// A new tick, for one gather's lookups.
    fn next_tick(&self) -> u64 {
        self.tick.fetch_add(1, Ordering::Relaxed).wrapping_add(1)
    }

    /// Block `key`, if in memory, stamped with `tick`; `true` when this is
    /// its first use at `tick` (so that a gather counts each block once).
    #[inline(always)]
    fn touch(&self, key: u64, tick: u64) -> Option<(&Bytes, bool)> {
        let c = self.blocks.get(&key)?;
        let first = c.stamp.load(Ordering::Relaxed) != tick;
        if first {
            c.stamp.store(tick, Ordering::Relaxed);
        }
        Some((&c.bytes, first))
    }

    fn put(&mut self, s: usize, b: u64, bytes: Bytes) {
        let len = bytes.len() as u64;
        if len > self.limit {
            return;
        }
        let stamp = AtomicU64::new(self.next_tick());
        if let Some(old) = self.blocks.insert(block_key(s, b), Cached { stamp, bytes }) {
            self.used -= old.bytes.len() as u64;
        }
        self.used += len;
        if self.used > self.limit {
            let low = self.limit - self.limit / 8;
            let mut by_age: Vec<(u64, u64)> = self
                .blocks
                .iter()
                .map(|(&k, c)| (c.stamp.load(Ordering::Relaxed), k))
                .collect();
            by_age.sort_unstable();
            for (_, key) in by_age {
                if self.used <= low {
                    break;
                }
                if let Some(old) = self.blocks.remove(&key) {
                    self.used -= old.bytes.len() as u64;
                }
            }
        }
    }
}

/// Blocks in a directory shared by processes: `ROOT/IDENTITY/S-B.blk`.
struct DiskCache {
    root: PathBuf,
    dir: PathBuf,
    limit: u64,
    /// This process's estimate of the directory's size, all stores.
    used: AtomicU64,
    evicting: Mutex<()>,
}

impl DiskCache {
    fn new(root: &Path, identity: &str, limit: u64) -> Result<DiskCache, Error> {
        let dir = root.join(identity);
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let used = scan(root).iter().map(|f| f.1).sum();
        Ok(DiskCache {
            root: root.to_path_buf(),
            dir,
            limit,
            used: AtomicU64::new(used),
            evicting: Mutex::new(()),
        })
    }

    fn file(&self, s: usize, b: u64) -> PathBuf {
        self.dir.join(format!("{s}-{b}.blk"))
    }

    /// The open file of block `b` of shard `s` if it holds `len` bytes
    /// (else it is removed, to be fetched again); marks it recently used.
    fn open(&self, s: usize, b: u64, len: u64) -> Option<File> {
        let p = self.file(s, b);
        let f = File::open(&p).ok()?;
        if f.metadata().ok()?.len() != len {
            let _ = std::fs::remove_file(&p);
            return None;
        }
        let _ = f.set_modified(SystemTime::now());
        Some(f)
    }

    fn get(&self, s: usize, b: u64, len: u64) -> Option<Bytes> {
        let p = self.file(s, b);
        let mut f = File::open(&p).ok()?;
        let mut buf = Vec::with_capacity(len as usize);
        // One byte more than expected tells a block of the wrong length.
        (&mut f).take(len + 1).read_to_end(&mut buf).ok()?;
        if buf.len() as u64 != len {
            let _ = std::fs::remove_file(&p);
            return None;
        }
        // Recently used: eviction goes by modification time.
        let _ = f.set_modified(SystemTime::now());
        Some(Bytes::from(buf))
    }

    fn put(&self, s: usize, b: u64, bytes: &[u8]) {
        let p = self.file(s, b);
        let tmp = self.dir.join(format!(
            ".{s}-{b}.{}.{:?}.tmp",
            std::process::id(),
            std::thread::current().id()
        ));
        let written = File::create(&tmp)
            .and_then(|mut f| f.write_all(bytes))
            .and_then(|()| std::fs::rename(&tmp, &p));
        if written.is_err() {
            // A full or read-only disk makes the cache a no-op, never an error.
            let _ = std::fs::remove_file(&tmp);
            return;
        }
        let used = self.used.fetch_add(bytes.len() as u64, Ordering::Relaxed) + bytes.len() as u64;
        if used > self.limit {
            self.evict();
        }
    }

    /// Deletes the least recently used blocks of every store in the
    /// directory until it is under 90% of its limit.
    fn evict(&self) {
        let Ok(_guard) = self.evicting.try_lock() else {
            return;
        };
        let mut files = scan(&self.root);
        files.sort_unstable_by_key(|f| f.2);
        let mut total: u64 = files.iter().map(|f| f.1).sum();
        let target = self.limit / 10 * 9;
        for (p, len, _) in files {
            if total <= target {
                break;
            }
            // Another process may have removed it first.
            let _ = std::fs::remove_file(&p);
            total = total.saturating_sub(len);
        }
        self.used.store(total, Ordering::Relaxed);
    }
}

/// Every block file under `root`: path, size, modification time.
fn scan(root: &Path) -> Vec<(PathBuf, u64, SystemTime)> {
    let mut out = Vec::new();
    let Ok(stores) = std::fs::read_dir(root) else {
        return out;
    };
    for store in stores.flatten() {
        let Ok(blocks) = std::fs::read_dir(store.path()) else {
            continue;
        };
        for block in blocks.flatten() {
            let p = block.path();
            if p.extension().is_some_and(|e| e == "blk")
                && let Ok(m) = block.metadata()
            {
                out.push((p, m.len(), m.modified().unwrap_or(SystemTime::UNIX_EPOCH)));
            }
        }
    }
    out
}

/// What [`push`] uploaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PushReport {
    /// Objects written (`meta.zr`, shards, dictionary).
    pub objects: usize,
    /// Bytes written.
    pub bytes: u64,
}

/// Uploads the published local store at `store` to `url`: `dict.zr` and
/// the payload shards (their committed bytes) first, multipart above
/// [`RemoteOptions::part_bytes`], then `meta.zr` (its static page and
/// location table) last, so that a store whose upload stopped half way has
/// no `meta.zr` and never opens.
///
/// # Errors
/// [`ErrorKind::NotAStore`], [`ErrorKind::NotPublished`] or a corrupt-store
/// error for the local store, exactly as [`crate::Store::open`];
/// [`ErrorKind::AlreadyExists`] when a store is already published at `url`
/// (a published store is immutable); [`ErrorKind::Remote`] when an upload
/// fails after its retries; [`ErrorKind::Io`] when a local file cannot be read.
pub fn push(store: impl AsRef<Path>, url: &str, o: &RemoteOptions) -> Result<PushReport, Error> {
    let store = store.as_ref();
    // Validates the store and holds its shared lock during the upload.
    let reader = StoreReader::open(store)?;
    if reader.is_remote() {
        return Err(Error::invalid(
            "push uploads a local store; its source is a URL",
        ));
    }
    let t = target(url, o)?;
    push_reader(store, reader, &t, o)
}

/// [`push`] of the opened local store `reader` at `store` to `t`.
fn push_reader(
    store: &Path,
    reader: StoreReader,
    t: &Target,
    o: &RemoteOptions,
) -> Result<PushReport, Error> {
    let exists = match block_on(t.store.head(&t.object(META_FILE)))? {
        Ok(_) => true,
        Err(object_store::Error::NotFound { .. }) => false,
        Err(e) => return Err(t.err(META_FILE, None, e)),
    };
    if exists {
        return Err(ErrorKind::AlreadyExists {
            path: PathBuf::from(&t.url),
        }
        .into());
    }
    let mut files: Vec<(String, u64)> = Vec::new();
    if let Some(d) = reader.dict() {
        files.push((DICT_FILE.to_string(), d.len() as u64));
    }
    let tails = reader.tails();
    debug_assert!(tails.len() <= MAX_DATA_SHARDS);
    for (s, &tail) in tails.iter().enumerate() {
        files.push((format::data_file(s), tail));
    }
    let table_end = STATIC_PAGE_LEN as u64 + reader.len() * RECORD_LOC_LEN as u64;
    let mut report = PushReport {
        objects: 0,
        bytes: 0,
    };
    for (name, len) in files {
        upload(t, o, &store.join(&name), &name, len)?;
        report.objects += 1;
        report.bytes += len;
    }
    upload(t, o, &store.join(META_FILE), META_FILE, table_end)?;
    report.objects += 1;
    report.bytes += table_end;
    drop(reader);
    Ok(report)
}

/// Uploads the first `len` bytes of local file `path` as object `name`.
fn upload(t: &Target, o: &RemoteOptions, path: &Path, name: &str, len: u64) -> Result<(), Error> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let read = |at: u64, n: usize| -> Result<Vec<u8>, Error> {
        let mut buf = vec![0u8; n];
        file.read_exact_at(&mut buf, at)
            .map_err(|e| Error::io(path, e))?;
        Ok(buf)
    };
    let obj = t.object(name);
    if len <= o.part_bytes as u64 {
        let body = read(0, len as usize)?;
        block_on(t.store.put(&obj, PutPayload::from(body)))?.map_err(|e| t.err(name, None, e))?;
        return Ok(());
    }
    block_on(async {
        let up = t
            .store
            .put_multipart(&obj)
            .await
            .map_err(|e| t.err(name, None, e))?;
        let mut w = WriteMultipart::new_with_chunk_size(up, o.part_bytes);
        let mut at = 0u64;
        while at < len {
            let n = (len - at).min(o.part_bytes as u64) as usize;
            let chunk = match read(at, n) {
                Ok(c) => c,
                Err(e) => {
                    let _ = w.abort().await;
                    return Err(e);
                }
            };
            if let Err(e) = w.wait_for_capacity(4).await {
                return Err(t.err(name, None, e));
            }
            w.put(Bytes::from(chunk));
            at += n as u64;
        }
        w.finish().await.map_err(|e| t.err(name, None, e))?;
        Ok::<_, Error>(())
    })?
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::Codec;

    #[test]
    fn fetched_pieces_are_found_by_shard_and_offset() {
        let f = Fetched::Pieces(vec![
            (0, 10, Bytes::from_static(b"abcdef")),
            (0, 100, Bytes::from_static(b"xyz")),
            (1, 0, Bytes::from_static(b"0123")),
        ]);
        assert_eq!(f.get(0, 10, 6), Some(&b"abcdef"[..]));
        assert_eq!(f.get(0, 12, 2), Some(&b"cd"[..]));
        assert_eq!(f.get(0, 101, 2), Some(&b"yz"[..]));
        assert_eq!(f.get(1, 1, 3), Some(&b"123"[..]));
        assert_eq!(f.get(0, 14, 4), None, "runs past its piece");
        assert_eq!(f.get(0, 9, 1), None, "before every piece");
        assert_eq!(f.get(1, 2, 3), None);
        assert_eq!(f.get(2, 0, 1), None);
    }

    #[test]
    fn the_memory_cache_evicts_least_recently_used_blocks() {
        let mut m = MemoryCache {
            limit: 10,
            ..MemoryCache::default()
        };
        // One lookup per gather, each at a tick of its own.
        let get = |m: &MemoryCache, b: u64| {
            let tick = m.next_tick();
            m.touch(block_key(0, b), tick)
                .map(|(bytes, _)| bytes.clone())
        };
        m.put(0, 0, Bytes::from_static(b"aaaa"));
        m.put(0, 1, Bytes::from_static(b"bbbb"));
        assert!(get(&m, 0).is_some()); // 0 is now the most recent
        m.put(0, 2, Bytes::from_static(b"cccc"));
        assert!(get(&m, 1).is_none(), "least recently used went first");
        assert!(get(&m, 0).is_some() && get(&m, 2).is_some());
        assert!(m.used <= m.limit);
        m.put(0, 3, Bytes::from(vec![0; 11]));
        assert!(get(&m, 3).is_none(), "a block over the limit is not kept");
        // A block is new to a gather once, whatever the lookups.
        let tick = m.next_tick();
        assert_eq!(m.touch(block_key(0, 0), tick).map(|h| h.1), Some(true));
        assert_eq!(m.touch(block_key(0, 0), tick).map(|h| h.1), Some(false));
        assert_eq!(m.touch(block_key(1, 0), tick).map(|h| h.1), None);
    }

    #[test]
    fn geometry_and_keys_place_offsets_in_their_blocks() {
        let pow2 = Geometry::new(4096);
        assert_eq!(pow2.split(0), (0, 0));
        assert_eq!(pow2.split(4095), (0, 4095));
        assert_eq!(pow2.split(4096 * 7 + 3), (7, 3));
        let odd = Geometry::new(5000);
        assert_eq!(odd.shift, None);
        assert_eq!(odd.split(4999), (0, 4999));
        assert_eq!(odd.split(5000 * 9 + 11), (9, 11));
        // Keys differ by shard and by block.
        let keys: std::collections::HashSet<u64> = (0..255)
            .flat_map(|s| (0..64).map(move |b| block_key(s, b)))
            .collect();
        assert_eq!(keys.len(), 255 * 64);
        // The hasher spreads consecutive keys over the low bits.
        let h = |k: u64| {
            let mut x = KeyHasher::default();
            x.write_u64(k);
            x.finish() & 1023
        };
        let buckets: std::collections::HashSet<u64> =
            (0..1024).map(|b| h(block_key(0, b))).collect();
        assert!(buckets.len() > 512, "{}", buckets.len());
    }

    #[test]
    fn resident_blocks_stitch_straddling_records() {
        let o = RemoteOptions::default()
            .memory_cache_bytes(1 << 20)
            .block_bytes(5000);
        let Ok(Some(cache)) = BlockCache::new(&o, "id") else {
            panic!("a memory tier");
        };
        let shard: Vec<u8> = (0..12_000u32).map(|i| (i % 251) as u8).collect();
        for b in 0..3u64 {
            let lo = b as usize * 5000;
            let hi = shard.len().min(lo + 5000);
            cache.put(1, b, &Bytes::copy_from_slice(&shard[lo..hi]));
        }
        // (record, shard, offset, length): inside, straddling two and three
        // blocks, aliased at one offset, and to the tail.
        let wanted = [
            (0, 1, 10, 100),
            (1, 1, 4990, 20),
            (2, 1, 4000, 7000),
            (3, 1, 4990, 5),
            (4, 1, 11_000, 1000),
        ];
        let (f, hits) = cache.resident(&wanted).unwrap();
        assert_eq!(hits, 3);
        for &(_, s, off, len) in &wanted {
            let (lo, hi) = (off as usize, off as usize + len as usize);
            assert_eq!(f.get(s, off, len), Some(&shard[lo..hi]), "{off}+{len}");
        }
        assert_eq!(f.get(0, 10, 1), None, "another shard");
        // A block not in memory: the general path's.
        assert!(cache.resident(&[(0, 1, 14_000, 10)]).is_none());
        assert!(cache.resident(&[(0, 2, 0, 10)]).is_none());
    }

    /// Deterministic bytes (splitmix64), a quarter of them repeating so
    /// that zstd has something to compress.
    fn bytes(seed: u64, n: usize) -> Vec<u8> {
        let mut x = seed;
        (0..n)
            .map(|i| {
                x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = x;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                if i % 4 == 0 {
                    b'x'
                } else {
                    (z ^ (z >> 31)) as u8
                }
            })
            .collect()
    }

    /// `count` indices below `n`, scattered, with repeats.
    fn scattered(n: u64, count: usize, seed: u64) -> Vec<u64> {
        bytes(seed, 8 * count)
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()) % n)
            .collect()
    }

    /// The store `name` in the in-memory object store `mem`.
    fn in_memory(mem: &Arc<dyn ObjectStore>, name: &str) -> Target {
        Target {
            store: Arc::clone(mem),
            prefix: ObjPath::from(format!("stores/{name}")),
            url: format!("memory://bkt/stores/{name}"),
        }
    }

    /// Pushes the local store at `path` into `mem` as `name`.
    fn push_in_memory(mem: &Arc<dyn ObjectStore>, path: &Path, name: &str) {
        let reader = StoreReader::open(path).unwrap();
        push_reader(
            path,
            reader,
            &in_memory(mem, name),
            &RemoteOptions::default(),
        )
        .unwrap();
    }

    /// Gathers the same batches twice, remotely and locally: the bytes
    /// agree, and the second pass is served from memory without a request.
    fn two_passes<T: PartialEq + std::fmt::Debug>(
        remote: &dyn Fn(&[u64]) -> T,
        local: &dyn Fn(&[u64]) -> T,
        stats: &dyn Fn() -> RemoteStats,
        batches: &[Vec<u64>],
        what: &str,
    ) {
        for pass in 0..2 {
            let before = stats();
            for idx in batches {
                assert_eq!(remote(idx), local(idx), "{what}, pass {pass}");
            }
            let after = stats();
            if pass == 1 {
                assert_eq!(
                    after.requests, before.requests,
                    "{what}: warm made requests"
                );
                assert_eq!(after.misses, before.misses, "{what}");
                assert!(after.memory_hits > before.memory_hits, "{what}: {after:?}");
            }
        }
    }

    #[test]
    fn warm_gathers_from_an_in_memory_object_store_match_the_local_store() {
        use crate::{CreateOptions, DType, DynDense, DynDenseWriter, DynRagged, DynRaggedWriter};
        let dir = tempfile::tempdir().unwrap();
        let mem: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        for codec in [Codec::Raw, Codec::Zstd] {
            // Dense: widths from a label to records larger than a block;
            // 16 bytes x 20000 records is big enough to copy in parallel.
            for (width, n) in [(1, 3000), (8, 3000), (784, 1500), (5000, 400), (16, 20_000)] {
                let name = format!("dense-{codec:?}-{width}");
                let path = dir.path().join(&name);
                let opts = CreateOptions::new(codec).data_shards(4);
                let mut w = DynDenseWriter::create(&path, DType::U8, &[width], &opts).unwrap();
                w.append_bytes(&bytes(width as u64, n * width), n).unwrap();
                w.close().unwrap();
                push_in_memory(&mem, &path, &name);
                let local = DynDense::open(&path).unwrap();
                let mut batches: Vec<Vec<u64>> =
                    (0..3).map(|seed| scattered(n as u64, 300, seed)).collect();
                batches.push((0..n as u64).rev().collect());
                for bs in [4096, 5000, 256 << 10] {
                    let o = RemoteOptions::default()
                        .memory_cache_bytes(64 << 20)
                        .block_bytes(bs);
                    let remote =
                        DynDense::from_engine(open_target(in_memory(&mem, &name), &o).unwrap())
                            .unwrap();
                    two_passes(
                        &|idx| remote.gather_bytes(idx).unwrap(),
                        &|idx| local.gather_bytes(idx).unwrap(),
                        &|| remote.remote_stats().unwrap(),
                        &batches,
                        &format!("{name}, {bs}-byte blocks"),
                    );
                    // Out of range: the same error, warm as cold.
                    let e = remote.gather_bytes(&[0, n as u64]).unwrap_err();
                    assert!(matches!(e.kind(), ErrorKind::IndexOutOfRange { .. }), "{e}");
                }
            }
            // Ragged: records of 4 to 12,000 bytes, straddling small blocks.
            let name = format!("ragged-{codec:?}");
            let path = dir.path().join(&name);
            let recs: Vec<(Vec<usize>, Vec<u8>)> = (0..1500usize)
                .map(|i| {
                    let len = 1 + (i * 7919) % 3000;
                    (vec![len], bytes(i as u64, 4 * len))
                })
                .collect();
            let opts = CreateOptions::new(codec).data_shards(3);
            let mut w = DynRaggedWriter::create(&path, DType::I32, 1, &opts).unwrap();
            w.append_bytes(recs.iter().map(|(s, b)| (&s[..], &b[..])))
                .unwrap();
            w.close().unwrap();
            push_in_memory(&mem, &path, &name);
            let local = DynRagged::open(&path).unwrap();
            // Batches of 256 decode in parallel, of 16 on the calling thread
            // (raw ones then straight out of the memory tier).
            let batches: Vec<Vec<u64>> = (0..6)
                .map(|seed| scattered(1500, if seed < 3 { 256 } else { 16 }, seed))
                .collect();
            let flat = |s: &DynRagged, idx: &[u64]| {
                let b = s.gather(idx).unwrap();
                (0..b.len())
                    .map(|k| (b.shape(k).to_vec(), b.bytes(k).to_vec()))
                    .collect::<Vec<_>>()
            };
            for bs in [4096, 5000, 256 << 10] {
                let o = RemoteOptions::default()
                    .memory_cache_bytes(64 << 20)
                    .block_bytes(bs);
                let remote =
                    DynRagged::from_engine(open_target(in_memory(&mem, &name), &o).unwrap())
                        .unwrap();
                two_passes(
                    &|idx| flat(&remote, idx),
                    &|idx| flat(&local, idx),
                    &|| remote.remote_stats().unwrap(),
                    &batches,
                    &format!("{name}, {bs}-byte blocks"),
                );
            }
        }
    }

    #[test]
    fn concurrent_gathers_through_a_tiny_memory_tier_agree() {
        use rayon::prelude::*;

        use crate::{CreateOptions, DType, DynDense, DynDenseWriter};
        let dir = tempfile::tempdir().unwrap();
        let mem: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let (width, n) = (784, 2000);
        let path = dir.path().join("s");
        let opts = CreateOptions::new(Codec::Raw).data_shards(4);
        let mut w = DynDenseWriter::create(&path, DType::U8, &[width], &opts).unwrap();
        w.append_bytes(&bytes(1, n * width), n).unwrap();
        w.close().unwrap();
        push_in_memory(&mem, &path, "s");
        let local = DynDense::open(&path).unwrap();
        // 16 blocks of 4 KiB: gathers evict each other's blocks while others
        // read, and a warm copy that misses falls back and puts.
        let o = RemoteOptions::default()
            .memory_cache_bytes(64 << 10)
            .block_bytes(4096);
        let remote = DynDense::from_engine(open_target(in_memory(&mem, "s"), &o).unwrap()).unwrap();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap();
        pool.install(|| {
            (0..64u64).into_par_iter().for_each(|seed| {
                // Small batches, often all resident; some large and parallel.
                let count = if seed % 8 == 0 {
                    17_000
                } else {
                    1 + (seed as usize * 37) % 64
                };
                let idx = scattered(n as u64, count, seed % 5);
                assert_eq!(
                    remote.gather_bytes(&idx).unwrap(),
                    local.gather_bytes(&idx).unwrap()
                );
            });
        });
        let stats = remote.remote_stats().unwrap();
        assert!(stats.memory_hits > 0 && stats.misses > 0, "{stats:?}");
    }

    #[test]
    fn the_disk_cache_refetches_a_block_of_the_wrong_length_and_evicts_by_age() {
        let dir = tempfile::tempdir().unwrap();
        let d = DiskCache::new(dir.path(), "id", 20).unwrap();
        d.put(0, 0, b"0123456789");
        assert_eq!(d.get(0, 0, 10).as_deref(), Some(&b"0123456789"[..]));
        assert_eq!(d.get(0, 0, 9), None, "wrong length is a miss");
        assert_eq!(d.get(0, 0, 10), None, "and was removed");
        d.put(0, 1, b"aaaaaaaaaa");
        std::thread::sleep(Duration::from_millis(20));
        d.put(0, 2, b"bbbbbbbbbb");
        std::thread::sleep(Duration::from_millis(20));
        d.put(0, 3, b"cccccccccc");
        assert!(d.used.load(Ordering::Relaxed) <= 20);
        assert_eq!(d.get(0, 1, 10), None, "the oldest block was evicted");
        assert!(d.get(0, 3, 10).is_some());
    }
}
