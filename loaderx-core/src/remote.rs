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
//!   server without validators, is a new identity. Several processes may
//!   share one directory: blocks are written to a fresh temporary file
//!   (created exclusively, never through a link) and renamed into place;
//!   every block file ends in a SHA-256 of the identity, the block's place
//!   and its bytes, checked on every read, so a damaged, truncated or
//!   foreign block is a miss and is fetched again, as is a block evicted by
//!   another process.
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
//! as one publication: every target is checked first, then `dict.zr` (a
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
    BackoffConfig, ClientOptions, ObjectMeta, ObjectStore, ObjectStoreExt, ObjectStoreScheme,
    PutMode, PutPayload, RetryConfig,
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

/// The object beside a pushed store's files that holds its random id (hex):
/// part of the block cache's identity, so that a store deleted and
/// re-published with the same shape is never served from the old blocks.
/// Python loaderx never reads it.
pub const STORE_ID_FILE: &str = "loaderx-store-id";

/// How stores on object storage are reached, fetched and cached.
///
/// [`RemoteOptions::from_env`] is what the plain `open`s use; every setter
/// returns the options for chaining. Its `Debug` prints every
/// [`RemoteOptions::config`] key but only the values of keys known to hold
/// no secret (region, endpoint without its user information, flags):
/// `aws_secret_access_key`, tokens, SAS keys and the like print as
/// `<redacted>`.
#[derive(Clone)]
pub struct RemoteOptions {
    config: Vec<(String, String)>,
    cache_dir: Option<PathBuf>,
    cache_bytes: u64,
    memory_cache_bytes: u64,
    block_bytes: u64,
    max_table_bytes: u64,
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

/// `object_store` configuration keys whose values hold no secret, by the
/// end of their name (`aws_region`, `region`, `aws_endpoint_url`, …).
const PUBLIC_CONFIG: [&str; 16] = [
    "region",
    "endpoint",
    "endpoint_url",
    "allow_http",
    "bucket",
    "bucket_name",
    "virtual_hosted_style_request",
    "skip_signature",
    "conditional_put",
    "use_emulator",
    "container_name",
    "account_name",
    "timeout",
    "connect_timeout",
    "user_agent",
    "unsigned_payload",
];

/// A config value as [`RemoteOptions`]'s `Debug` prints it.
fn config_for_debug(key: &str, value: &str) -> String {
    let k = key.to_ascii_lowercase();
    let k = k.rsplit_once("aws_").map_or(k.as_str(), |(_, rest)| rest);
    let k = k.rsplit_once("azure_storage_").map_or(k, |(_, rest)| rest);
    let k = k.rsplit_once("google_").map_or(k, |(_, rest)| rest);
    if PUBLIC_CONFIG.contains(&k) {
        crate::redact_url(value)
    } else {
        "<redacted>".to_string()
    }
}

impl std::fmt::Debug for RemoteOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let config: Vec<(&str, String)> = self
            .config
            .iter()
            .map(|(k, v)| (k.as_str(), config_for_debug(k, v)))
            .collect();
        f.debug_struct("RemoteOptions")
            .field("config", &config)
            .field("cache_dir", &self.cache_dir)
            .field("cache_bytes", &self.cache_bytes)
            .field("memory_cache_bytes", &self.memory_cache_bytes)
            .field("block_bytes", &self.block_bytes)
            .field("max_table_bytes", &self.max_table_bytes)
            .field("gap_bytes", &self.gap_bytes)
            .field("max_request_bytes", &self.max_request_bytes)
            .field("concurrency", &self.concurrency)
            .field("part_bytes", &self.part_bytes)
            .field("retries", &self.retries)
            .field("backoff", &self.backoff)
            .field("retry_timeout", &self.retry_timeout)
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .finish()
    }
}

impl Default for RemoteOptions {
    /// No cache directory, a 256 MiB memory cache of 256 KiB blocks, a
    /// location table of at most 16 GiB (a billion records),
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
            max_table_bytes: 16 << 30,
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

    /// Largest location table `open` reads (16 bytes per record, held in
    /// memory while the store is open); a `meta.zr` claiming more is
    /// refused before anything is allocated for it.
    pub fn max_table_bytes(mut self, bytes: u64) -> Self {
        self.max_table_bytes = bytes;
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

/// The internal runtime that drives `object_store`: built exactly once,
/// however many threads race on the first use (a second runtime built and
/// dropped inside an async context would panic).
fn runtime() -> Result<&'static tokio::runtime::Runtime, Error> {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    static BUILDING: Mutex<()> = Mutex::new(());
    init_once(&RT, &BUILDING, || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .thread_name("loaderx-remote")
            .enable_all()
            .build()
            .map_err(|e| Error::io("loaderx remote runtime", e))
    })
}

/// `cell`'s value, built by `build` on first use while `lock` is held, so
/// that racing callers build it once (stable Rust's `OnceLock` has no
/// fallible `get_or_try_init`); a failed build leaves `cell` empty.
fn init_once<'a, T>(
    cell: &'a OnceLock<T>,
    lock: &Mutex<()>,
    build: impl FnOnce() -> Result<T, Error>,
) -> Result<&'a T, Error> {
    if let Some(v) = cell.get() {
        return Ok(v);
    }
    let _guard = lock
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(v) = cell.get() {
        return Ok(v);
    }
    let v = build()?;
    Ok(cell.get_or_init(|| v))
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
    /// The URL without a trailing slash, user information or query
    /// ([`crate::redact_url`]): for messages, and the store's path.
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
            detail: crate::remote_url::redact_text(&e.to_string()),
        }
        .into()
    }
}

fn target(url: &str, o: &RemoteOptions) -> Result<Target, Error> {
    let trimmed = url.trim_end_matches('/');
    let shown = crate::redact_url(trimmed);
    let bad = |e: &dyn std::fmt::Display| {
        let e = crate::remote_url::redact_text(&e.to_string());
        Error::invalid(format!("{shown}: not a store URL: {e}"))
    };
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
        url: shown,
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
    let (meta_head, page) = block_on(async {
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
        Ok::<_, Error>((head, raw))
    })??;
    let meta_len = meta_head.size;
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
    // The table is sized by the page's record count, which `check_page`
    // bounded by the size the server claims: bound it by the option too
    // before anything is allocated or a request is listed.
    let table_len = table_end - STATIC_PAGE_LEN as u64;
    if table_len > o.max_table_bytes {
        return Err(Error::corrupt(
            path.join(META_FILE),
            format!(
                "meta.zr claims a location table of {table_len} bytes ({} records), more than \
                 the {}-byte limit (RemoteOptions::max_table_bytes)",
                checked.page.header.length, o.max_table_bytes
            ),
        ));
    }
    let mut bytes: Vec<u8> = Vec::new();
    let capacity = usize::try_from(table_end)
        .ok()
        .filter(|&n| bytes.try_reserve_exact(n).is_ok());
    if capacity.is_none() {
        return Err(Error::corrupt(
            path.join(META_FILE),
            format!("cannot allocate its {table_end}-byte location table"),
        ));
    }
    bytes.extend_from_slice(&raw);
    // Everything else at once: the table in chunks (listed lazily, each
    // appended as it arrives, so the table is held once), the validators of
    // the dictionary and the shards, and the store id.
    let (bytes, dict_head, shard_heads, store_id) = block_on(async {
        let chunks = (0..table_len.div_ceil(TABLE_CHUNK)).map(|i| {
            let a = STATIC_PAGE_LEN as u64 + i * TABLE_CHUNK;
            a..table_end.min(a + TABLE_CHUNK)
        });
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
            .try_fold(bytes, |mut acc, b| async move {
                acc.extend_from_slice(&b);
                Ok(acc)
            });
        let head = |name: String| {
            let t = &t;
            async move {
                match t.store.head(&t.object(&name)).await {
                    Ok(h) => Ok(Some(h)),
                    Err(object_store::Error::NotFound { .. }) => Ok(None),
                    Err(e) => Err(t.err(&name, None, e)),
                }
            }
        };
        let dict = head(DICT_FILE.to_string());
        let shards = futures::stream::iter(0..shard_count)
            .map(|s| head(format::data_file(s)))
            .buffered(o.concurrency)
            .try_collect::<Vec<Option<ObjectMeta>>>();
        let id = read_store_id(&t);
        futures::try_join!(table, dict, shards, id)
    })??;
    let dict_len = dict_head.as_ref().map(|h| h.size);
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
    for (s, head) in shard_heads.iter().enumerate() {
        let p = path.join(format::data_file(s));
        let tail = checked.page.tails[s];
        let Some(head) = head else {
            return Err(Error::corrupt(&p, "payload shard is missing"));
        };
        check_shard_len(&p, head.size, tail)?;
        shards.push(Shard::remote(tail));
        tails.push(tail);
    }
    // The cache identity: every validator `open` fetched (a re-published
    // store of the same shape has a `meta.zr` of the same bytes, and over
    // plain HTTP perhaps no validator at all, hence the store id), and the
    // block size (blocks of two sizes never share a directory).
    let identity = {
        let mut h = Sha256::new();
        h.update(b"loaderx-blocks-v1\0");
        h.update(t.url.as_bytes());
        h.update([0]);
        h.update(o.block_bytes.to_le_bytes());
        h.update(raw);
        validators(&mut h, Some(&meta_head));
        validators(&mut h, dict_head.as_ref());
        for head in &shard_heads {
            validators(&mut h, head.as_ref());
        }
        h.update(store_id.as_deref().unwrap_or_default());
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
    let table = Some(Region::Heap(bytes));
    Ok(StoreReader::assemble(&path, None, table, checked, shards, codec, dict).with_remote(remote))
}

/// Hashes an object's validators (size, ETag, last modified, version; a
/// missing object hashes as such) into a cache identity.
fn validators(h: &mut Sha256, m: Option<&ObjectMeta>) {
    let Some(m) = m else {
        h.update([0]);
        return;
    };
    h.update([1]);
    h.update(m.size.to_le_bytes());
    for v in [&m.e_tag, &m.version] {
        h.update(v.as_deref().unwrap_or_default().as_bytes());
        h.update([0]);
    }
    h.update(
        m.last_modified
            .timestamp_nanos_opt()
            .unwrap_or_default()
            .to_le_bytes(),
    );
}

/// The random id that [`push`] writes beside a store ([`STORE_ID_FILE`]),
/// if there is one of a plausible size.
async fn read_store_id(t: &Target) -> Result<Option<Vec<u8>>, Error> {
    match t.store.get(&t.object(STORE_ID_FILE)).await {
        Ok(r) if r.meta.size <= 256 => {
            let b = r.bytes().await.map_err(|e| t.err(STORE_ID_FILE, None, e))?;
            Ok(Some(b.to_vec()))
        }
        Ok(_) | Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(t.err(STORE_ID_FILE, None, e)),
    }
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
                        Hit::Disk(_) => &inner.stats.disk_hits,
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
            let piece = if b0 == b1 {
                let off = seg.start - b0 * bs;
                block(b0)?
                    .bytes()
                    .slice(off as usize..(off + seg.end - seg.start) as usize)
            } else {
                let mut buf = BytesMut::with_capacity((seg.end - seg.start) as usize);
                for b in b0..=b1 {
                    let len = block_len(seg.shard, b);
                    let lo = seg.start.max(b * bs) - b * bs;
                    let hi = seg.end.min(b * bs + len) - b * bs;
                    buf.extend_from_slice(&block(b)?.bytes()[lo as usize..hi as usize]);
                }
                buf.freeze()
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
            *hit = disk.get(s, b, len).map(|bytes| {
                if let Some(m) = &self.memory
                    && let Ok(mut m) = m.write()
                {
                    m.put(s, b, bytes.clone());
                }
                Hit::Disk(bytes)
            });
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
    /// Read whole from the directory, its checksum verified.
    Disk(Bytes),
}

impl Hit {
    fn bytes(&self) -> &Bytes {
        match self {
            Hit::Memory(b) | Hit::Disk(b) => b,
        }
    }
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

/// The subdirectory of a cache directory that loaderx owns: eviction
/// deletes only in it.
pub const CACHE_SUBDIR: &str = "loaderx-blocks-v1";

/// The marker file in [`CACHE_SUBDIR`] that says whose it is.
const CACHE_MARKER: &str = "LOADERX-BLOCK-CACHE";

/// Bytes of the checksum that follows each block in its file.
const CHECKSUM_LEN: usize = 32;

/// Blocks in a directory shared by processes:
/// `ROOT/loaderx-blocks-v1/IDENTITY/S-B.blk`, each a block's bytes and
/// their checksum.
struct DiskCache {
    /// `ROOT/loaderx-blocks-v1`.
    root: PathBuf,
    dir: PathBuf,
    /// The store's identity, part of every block's checksum.
    identity: String,
    limit: u64,
    /// This process's estimate of the directory's size, all stores.
    used: AtomicU64,
    evicting: Mutex<()>,
}

/// Creates directory `dir` if absent and checks that it is a directory, not
/// a symbolic link to one.
fn own_dir(dir: &Path) -> Result<(), Error> {
    match std::fs::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(Error::io(dir, e)),
    }
    let m = std::fs::symlink_metadata(dir).map_err(|e| Error::io(dir, e))?;
    if !m.file_type().is_dir() {
        return Err(Error::io(
            dir,
            std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "the block cache needs a directory here, and this is not one (a link?)",
            ),
        ));
    }
    Ok(())
}

/// Opens `path` for reading without following a symbolic link.
fn open_nofollow(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

impl DiskCache {
    fn new(base: &Path, identity: &str, limit: u64) -> Result<DiskCache, Error> {
        std::fs::create_dir_all(base).map_err(|e| Error::io(base, e))?;
        let root = base.join(CACHE_SUBDIR);
        own_dir(&root)?;
        let marker = root.join(CACHE_MARKER);
        {
            use std::os::unix::fs::OpenOptionsExt;
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&marker)
            {
                Ok(mut f) => {
                    let _ = f.write_all(
                        b"loaderx block cache: blocks of remote stores, evicted by loaderx; \
                          safe to delete when no loaderx process runs\n",
                    );
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(Error::io(&marker, e)),
            }
        }
        let dir = root.join(identity);
        own_dir(&dir)?;
        let used = scan(&root).iter().map(|f| f.1).sum();
        Ok(DiskCache {
            root,
            dir,
            identity: identity.to_string(),
            limit,
            used: AtomicU64::new(used),
            evicting: Mutex::new(()),
        })
    }

    fn file(&self, s: usize, b: u64) -> PathBuf {
        self.dir.join(format!("{s}-{b}.blk"))
    }

    /// The checksum of block `b` of shard `s` holding `bytes`: bound to the
    /// store's identity and the block's place, so that a damaged block, or
    /// one of another store or block size, is a miss.
    fn checksum(&self, s: usize, b: u64, bytes: &[u8]) -> [u8; CHECKSUM_LEN] {
        let mut h = Sha256::new();
        h.update(self.identity.as_bytes());
        h.update((s as u64).to_le_bytes());
        h.update(b.to_le_bytes());
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
        h.finalize().into()
    }

    /// Block `b` of shard `s` if its file holds `len` bytes and their
    /// checksum (else the file is removed, to be fetched again); marks it
    /// recently used.
    fn get(&self, s: usize, b: u64, len: u64) -> Option<Bytes> {
        let p = self.file(s, b);
        let mut f = open_nofollow(&p).ok()?;
        let want = len + CHECKSUM_LEN as u64;
        let mut buf = Vec::with_capacity(usize::try_from(want).ok()?);
        // One byte more than expected tells a block of the wrong length.
        (&mut f).take(want + 1).read_to_end(&mut buf).ok()?;
        let ok = buf.len() as u64 == want && {
            let (block, sum) = buf.split_at(len as usize);
            self.checksum(s, b, block)[..] == *sum
        };
        if !ok {
            let _ = std::fs::remove_file(&p);
            return None;
        }
        // Recently used: eviction goes by modification time.
        let _ = f.set_modified(SystemTime::now());
        buf.truncate(len as usize);
        Some(Bytes::from(buf))
    }

    fn put(&self, s: usize, b: u64, bytes: &[u8]) {
        // A fresh name, created with O_EXCL (never an existing file or link).
        let written = tempfile::Builder::new()
            .prefix(".blk-")
            .suffix(".tmp")
            .tempfile_in(&self.dir)
            .and_then(|mut tmp| {
                tmp.write_all(bytes)?;
                tmp.write_all(&self.checksum(s, b, bytes))?;
                tmp.persist(self.file(s, b)).map_err(|e| e.error)?;
                Ok(())
            });
        if written.is_err() {
            // A full or read-only disk makes the cache a no-op, never an
            // error (the temporary file is removed when dropped).
            return;
        }
        let n = (bytes.len() + CHECKSUM_LEN) as u64;
        let used = self.used.fetch_add(n, Ordering::Relaxed) + n;
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

/// True for a name that loaderx gives a store's directory in the cache
/// (32 lowercase hex digits).
fn is_identity_name(name: &str) -> bool {
    name.len() == 32 && name.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

/// True for a name that loaderx gives a block file (`S-B.blk`).
fn is_block_name(name: &str) -> bool {
    name.strip_suffix(".blk")
        .and_then(|n| n.split_once('-'))
        .is_some_and(|(s, b)| {
            !s.is_empty() && !b.is_empty() && s.bytes().chain(b.bytes()).all(|c| c.is_ascii_digit())
        })
}

/// Every block file that loaderx wrote under `root` (its own
/// [`CACHE_SUBDIR`]): regular files named as blocks, in directories named
/// as identities, links never followed. Path, size, modification time.
fn scan(root: &Path) -> Vec<(PathBuf, u64, SystemTime)> {
    let mut out = Vec::new();
    let Ok(stores) = std::fs::read_dir(root) else {
        return out;
    };
    for store in stores.flatten() {
        if !store.file_type().is_ok_and(|t| t.is_dir())
            || !store.file_name().to_str().is_some_and(is_identity_name)
        {
            continue;
        }
        let Ok(blocks) = std::fs::read_dir(store.path()) else {
            continue;
        };
        for block in blocks.flatten() {
            if block.file_type().is_ok_and(|t| t.is_file())
                && block.file_name().to_str().is_some_and(is_block_name)
                && let Ok(m) = block.metadata()
            {
                out.push((
                    block.path(),
                    m.len(),
                    m.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                ));
            }
        }
    }
    out
}

/// What [`push`] or [`push_stores`] uploaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PushReport {
    /// Objects written (`meta.zr`, shards, dictionary, store id).
    pub objects: usize,
    /// Bytes of the store files written (the store id not counted).
    pub bytes: u64,
}

/// Uploads the published local store at `store` to `url`: `dict.zr` and
/// the payload shards (their committed bytes) first, multipart above
/// [`RemoteOptions::part_bytes`], then `meta.zr` (its static page and
/// location table) last, so that a store whose upload stopped half way has
/// no `meta.zr` and never opens. [`push_stores`] of one store.
///
/// # Errors
/// As [`push_stores`].
pub fn push(store: impl AsRef<Path>, url: &str, o: &RemoteOptions) -> Result<PushReport, Error> {
    push_stores(&[(store.as_ref(), url)], o)
}

/// One store of a [`push_stores`], checked and ready to upload.
struct Pending {
    path: PathBuf,
    reader: StoreReader,
    target: Target,
    /// Objects uploaded so far, for the error of a failed push.
    uploaded: Vec<String>,
}

/// Uploads a set of published local stores, `(store, url)`, as one
/// publication: every target is checked first (each local store opens, no
/// store is published at any URL: nothing is uploaded otherwise), then the
/// payload of every store is uploaded (stale `dict.zr` removed, dictionary,
/// shards, and the store id [`STORE_ID_FILE`]), and only then every
/// `meta.zr`, each created only if absent. When a `meta.zr` cannot be
/// written, those this call wrote are deleted again, so a failed push
/// publishes nothing; the error says exactly what it left.
///
/// # Errors
/// [`ErrorKind::NotAStore`], [`ErrorKind::NotPublished`] or a corrupt-store
/// error for a local store, exactly as [`crate::Store::open`];
/// [`ErrorKind::AlreadyExists`] when a store is already published at a URL
/// (a published store is immutable), found before anything was uploaded;
/// [`ErrorKind::InvalidArgument`] for a bad URL or two stores for one URL;
/// [`ErrorKind::Remote`] when a check fails; [`ErrorKind::PushFailed`]
/// when an upload fails (or a concurrent push publishes first) after
/// uploading began, naming what remains.
pub fn push_stores<P: AsRef<Path>, U: AsRef<str>>(
    stores: &[(P, U)],
    o: &RemoteOptions,
) -> Result<PushReport, Error> {
    let mut pending = Vec::with_capacity(stores.len());
    for (store, url) in stores {
        let store = store.as_ref();
        // Validates the store and holds its shared lock during the upload.
        let reader = StoreReader::open(store)?;
        if reader.is_remote() {
            return Err(Error::invalid(
                "push uploads a local store; its source is a URL",
            ));
        }
        let target = target(url.as_ref(), o)?;
        pending.push(Pending {
            path: store.to_path_buf(),
            reader,
            target,
            uploaded: Vec::new(),
        });
    }
    push_pending(pending, o)
}

/// [`push_stores`] of checked local stores.
fn push_pending(mut pending: Vec<Pending>, o: &RemoteOptions) -> Result<PushReport, Error> {
    let mut urls: Vec<&str> = pending.iter().map(|p| p.target.url.as_str()).collect();
    urls.sort_unstable();
    if let Some(w) = urls.windows(2).find(|w| w[0] == w[1]) {
        return Err(Error::invalid(format!(
            "{}: two stores pushed to one URL",
            w[0]
        )));
    }
    // Preflight: nothing is published at any target.
    for p in &pending {
        if meta_exists(&p.target)? {
            return Err(ErrorKind::AlreadyExists {
                path: PathBuf::from(&p.target.url),
            }
            .into());
        }
    }
    let mut report = PushReport {
        objects: 0,
        bytes: 0,
    };
    // Every payload object of every store.
    for k in 0..pending.len() {
        if let Err(e) = push_payload(&mut pending[k], o, &mut report) {
            let url = PathBuf::from(&pending[k].target.url);
            return Err(push_failed(url, e, &pending, &[], &[]));
        }
    }
    // Then every meta.zr; on failure, delete the ones written here.
    let mut published: Vec<usize> = Vec::new();
    for k in 0..pending.len() {
        let p = &pending[k];
        let table_end = STATIC_PAGE_LEN as u64 + p.reader.len() * RECORD_LOC_LEN as u64;
        let written = read_file(&p.path.join(META_FILE), table_end)
            .and_then(|body| put_meta(&p.target, body));
        match written {
            Ok(()) => {
                published.push(k);
                report.objects += 1;
                report.bytes += table_end;
            }
            Err(e) => {
                let url = PathBuf::from(&p.target.url);
                let mut undone = Vec::new();
                let mut kept = Vec::new();
                for &j in published.iter().rev() {
                    let t = &pending[j].target;
                    match block_on(t.store.delete(&t.object(META_FILE))) {
                        Ok(Ok(())) => undone.push(j),
                        _ => kept.push(j),
                    }
                }
                return Err(push_failed(url, e, &pending, &undone, &kept));
            }
        }
    }
    drop(pending);
    Ok(report)
}

/// The error of a push that failed after uploading began: `error`, and
/// what remains (`undone`: stores whose `meta.zr` was deleted again;
/// `kept`: stores whose `meta.zr` could not be).
fn push_failed(
    path: PathBuf,
    error: Error,
    pending: &[Pending],
    undone: &[usize],
    kept: &[usize],
) -> Error {
    let mut parts: Vec<String> = Vec::new();
    for p in pending.iter().filter(|p| !p.uploaded.is_empty()) {
        parts.push(format!("{}: {}", p.target.url, p.uploaded.join(", ")));
    }
    let mut remains = if parts.is_empty() {
        "nothing was uploaded".to_string()
    } else {
        format!(
            "payload objects remain (no store opens from them; a new push overwrites them): {}",
            parts.join("; ")
        )
    };
    if !undone.is_empty() {
        let urls: Vec<&str> = undone
            .iter()
            .map(|&j| pending[j].target.url.as_str())
            .collect();
        remains.push_str(&format!(
            "; meta.zr written and deleted again: {}",
            urls.join(", ")
        ));
    }
    if kept.is_empty() {
        remains.push_str("; no meta.zr of this push is left");
    } else {
        let urls: Vec<&str> = kept
            .iter()
            .map(|&j| pending[j].target.url.as_str())
            .collect();
        remains.push_str(&format!(
            "; meta.zr could not be deleted, so these stores are published: {}",
            urls.join(", ")
        ));
    }
    ErrorKind::PushFailed {
        path,
        error,
        remains,
    }
    .into()
}

/// True when `t` has a `meta.zr`.
fn meta_exists(t: &Target) -> Result<bool, Error> {
    match block_on(t.store.head(&t.object(META_FILE)))? {
        Ok(_) => Ok(true),
        Err(object_store::Error::NotFound { .. }) => Ok(false),
        Err(e) => Err(t.err(META_FILE, None, e)),
    }
}

/// Writes `meta.zr` only if absent (`PutMode::Create`; where the service
/// has no conditional write, as plain HTTP, after a check).
fn put_meta(t: &Target, body: Vec<u8>) -> Result<(), Error> {
    let obj = t.object(META_FILE);
    let exists = || ErrorKind::AlreadyExists {
        path: PathBuf::from(&t.url),
    };
    let payload = PutPayload::from(body);
    let create = object_store::PutOptions::from(PutMode::Create);
    match block_on(t.store.put_opts(&obj, payload.clone(), create))? {
        Ok(_) => Ok(()),
        Err(
            object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. },
        ) => Err(exists().into()),
        Err(object_store::Error::NotImplemented { .. }) => {
            if meta_exists(t)? {
                return Err(exists().into());
            }
            block_on(t.store.put(&obj, payload))?.map_err(|e| t.err(META_FILE, None, e))?;
            Ok(())
        }
        Err(e) => Err(t.err(META_FILE, None, e)),
    }
}

/// Uploads every object of `p` but its `meta.zr`: removes a `dict.zr` that
/// a store without one must not have (an earlier push's), then the
/// dictionary, the shards and the store id.
fn push_payload(p: &mut Pending, o: &RemoteOptions, report: &mut PushReport) -> Result<(), Error> {
    let t = &p.target;
    let dict = p.reader.dict().map(|d| d.len() as u64);
    if dict.is_none() {
        match block_on(t.store.delete(&t.object(DICT_FILE)))? {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(t.err(DICT_FILE, None, e)),
        }
    }
    let mut files: Vec<(String, u64)> = Vec::new();
    if let Some(len) = dict {
        files.push((DICT_FILE.to_string(), len));
    }
    let tails = p.reader.tails();
    debug_assert!(tails.len() <= MAX_DATA_SHARDS);
    for (s, &tail) in tails.iter().enumerate() {
        files.push((format::data_file(s), tail));
    }
    for (name, len) in files {
        upload(t, o, &p.path.join(&name), &name, len)?;
        p.uploaded.push(name);
        report.objects += 1;
        report.bytes += len;
    }
    let id = new_store_id(&p.path);
    block_on(
        t.store
            .put(&t.object(STORE_ID_FILE), PutPayload::from(id.into_bytes())),
    )?
    .map_err(|e| t.err(STORE_ID_FILE, None, e))?;
    p.uploaded.push(STORE_ID_FILE.to_string());
    report.objects += 1;
    Ok(())
}

/// A fresh store id: 128 bits of a hash of the time, the process, a
/// counter and the store's path, in hex. Unique, not secret.
fn new_store_id(path: &Path) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = Sha256::new();
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    h.update(now.as_nanos().to_le_bytes());
    h.update(std::process::id().to_le_bytes());
    h.update(COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    h.update(format!("{:?}", std::thread::current().id()).as_bytes());
    h.update(path.as_os_str().as_encoded_bytes());
    let d = h.finalize();
    d[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// The first `len` bytes of local file `path`.
fn read_file(path: &Path, len: u64) -> Result<Vec<u8>, Error> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    read_at(&file, path, 0, usize::try_from(len).unwrap_or(usize::MAX))
}

/// `n` bytes of `file` (at `path`) from `at`.
fn read_at(file: &File, path: &Path, at: u64, n: usize) -> Result<Vec<u8>, Error> {
    let mut buf = Vec::new();
    buf.try_reserve_exact(n).map_err(|_| {
        Error::io(
            path,
            std::io::Error::new(std::io::ErrorKind::OutOfMemory, "cannot allocate"),
        )
    })?;
    buf.resize(n, 0);
    file.read_exact_at(&mut buf, at)
        .map_err(|e| Error::io(path, e))?;
    Ok(buf)
}

/// Uploads the first `len` bytes of local file `path` as object `name`;
/// a multipart upload that fails is aborted, so it leaves no parts.
fn upload(t: &Target, o: &RemoteOptions, path: &Path, name: &str, len: u64) -> Result<(), Error> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let obj = t.object(name);
    if len <= o.part_bytes as u64 {
        let body = read_at(&file, path, 0, len as usize)?;
        block_on(t.store.put(&obj, PutPayload::from(body)))?.map_err(|e| t.err(name, None, e))?;
        return Ok(());
    }
    block_on(async {
        let mut up = t
            .store
            .put_multipart(&obj)
            .await
            .map_err(|e| t.err(name, None, e))?;
        let parts = async {
            let mut in_flight = futures::stream::FuturesUnordered::new();
            let mut at = 0u64;
            while at < len {
                let n = (len - at).min(o.part_bytes as u64) as usize;
                let chunk = read_at(&file, path, at, n)?;
                in_flight.push(up.put_part(PutPayload::from(chunk)));
                at += n as u64;
                if in_flight.len() >= 4
                    && let Some(r) = in_flight.next().await
                {
                    r.map_err(|e| t.err(name, None, e))?;
                }
            }
            while let Some(r) = in_flight.next().await {
                r.map_err(|e| t.err(name, None, e))?;
            }
            up.complete().await.map_err(|e| t.err(name, None, e))?;
            Ok::<_, Error>(())
        };
        let result = parts.await;
        if result.is_err() {
            // Best effort: the upload's error is the one reported.
            let _ = up.abort().await;
        }
        result
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
        push_to(path, in_memory(mem, name)).unwrap();
    }

    /// Pushes the local store at `path` to `target`.
    fn push_to(path: &Path, target: Target) -> Result<PushReport, Error> {
        let p = Pending {
            path: path.to_path_buf(),
            reader: StoreReader::open(path).unwrap(),
            target,
            uploaded: Vec::new(),
        };
        push_pending(vec![p], &RemoteOptions::default())
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
            // A packed gather reads the same records (fetched the same way).
            let flat = |s: &DynRagged, idx: &[u64]| {
                let [b, p] = [s.gather(idx).unwrap(), s.gather_packed(idx).unwrap()];
                assert!(p.layout().is_packed());
                let records = |b: &crate::DynRaggedBatch| {
                    (0..b.len())
                        .map(|k| (b.shape(k).to_vec(), b.bytes(k).to_vec()))
                        .collect::<Vec<_>>()
                };
                assert_eq!(records(&p), records(&b));
                records(&b)
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

    const ID: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn the_disk_cache_refetches_a_damaged_block_and_evicts_by_age() {
        let dir = tempfile::tempdir().unwrap();
        // Each block file is its bytes and a 32-byte checksum: 42 bytes.
        let d = DiskCache::new(dir.path(), ID, 100).unwrap();
        d.put(0, 0, b"0123456789");
        assert_eq!(d.get(0, 0, 10).as_deref(), Some(&b"0123456789"[..]));
        assert_eq!(d.get(0, 0, 9), None, "wrong length is a miss");
        assert_eq!(d.get(0, 0, 10), None, "and was removed");
        // A flipped byte, or a block of another place, fails its checksum.
        d.put(0, 5, b"abcdefghij");
        let p = d.file(0, 5);
        let mut raw = std::fs::read(&p).unwrap();
        raw[3] ^= 1;
        std::fs::write(&p, &raw).unwrap();
        assert_eq!(d.get(0, 5, 10), None, "damaged");
        d.put(0, 6, b"abcdefghij");
        std::fs::rename(d.file(0, 6), d.file(0, 7)).unwrap();
        assert_eq!(d.get(0, 7, 10), None, "moved to another block");
        d.put(0, 6, b"abcdefghij");
        let other = DiskCache::new(dir.path(), &ID.replace('0', "f"), 100).unwrap();
        std::fs::copy(d.file(0, 6), other.file(0, 6)).unwrap();
        assert_eq!(other.get(0, 6, 10), None, "of another store");
        assert!(d.get(0, 6, 10).is_some());
        std::fs::remove_file(d.file(0, 6)).unwrap();
        d.put(0, 1, b"aaaaaaaaaa");
        std::thread::sleep(Duration::from_millis(20));
        d.put(0, 2, b"bbbbbbbbbb");
        std::thread::sleep(Duration::from_millis(20));
        d.put(0, 3, b"cccccccccc");
        assert!(d.used.load(Ordering::Relaxed) <= 100);
        assert_eq!(d.get(0, 1, 10), None, "the oldest block was evicted");
        assert!(d.get(0, 3, 10).is_some());
        // Temporary files are gone.
        let names: Vec<String> = std::fs::read_dir(&d.dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| n.ends_with(".blk")), "{names:?}");
    }

    #[test]
    fn eviction_deletes_only_in_the_owned_subdirectory() {
        let dir = tempfile::tempdir().unwrap();
        // What a misconfigured LOADERX_CACHE_DIR=$HOME/data holds.
        let mine = dir.path().join("experiment");
        std::fs::create_dir(&mine).unwrap();
        std::fs::write(mine.join("0-1.blk"), b"precious").unwrap();
        std::fs::write(dir.path().join("top.blk"), b"precious").unwrap();
        let named = dir.path().join(ID);
        std::fs::create_dir(&named).unwrap();
        std::fs::write(named.join("0-0.blk"), b"precious").unwrap();
        let d = DiskCache::new(dir.path(), ID, 50).unwrap();
        assert!(dir.path().join(CACHE_SUBDIR).join(CACHE_MARKER).is_file());
        assert!(d.dir.starts_with(dir.path().join(CACHE_SUBDIR)));
        for b in 0..8 {
            d.put(0, b, b"0123456789");
        }
        assert!(d.used.load(Ordering::Relaxed) <= 50);
        for p in [
            mine.join("0-1.blk"),
            dir.path().join("top.blk"),
            named.join("0-0.blk"),
        ] {
            assert_eq!(std::fs::read(&p).unwrap(), b"precious", "{}", p.display());
        }
        // A link in place of a block is not followed, and a put replaces
        // the link, never its target.
        let outside = dir.path().join("outside");
        std::fs::write(&outside, b"keep").unwrap();
        let _ = std::fs::remove_file(d.file(0, 7));
        std::os::unix::fs::symlink(&outside, d.file(0, 7)).unwrap();
        assert_eq!(d.get(0, 7, 10), None);
        d.put(0, 7, b"0123456789");
        assert_eq!(std::fs::read(&outside).unwrap(), b"keep");
        assert!(d.get(0, 7, 10).is_some());
        // A link in place of the owned subdirectory is refused.
        let other = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(dir.path(), other.path().join(CACHE_SUBDIR)).unwrap();
        assert!(DiskCache::new(other.path(), ID, 50).is_err());
    }

    #[test]
    fn the_runtime_cell_is_built_once_however_many_threads_race() {
        let cell: OnceLock<u64> = OnceLock::new();
        let lock = Mutex::new(());
        let builds = AtomicU64::new(0);
        let barrier = std::sync::Barrier::new(8);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    barrier.wait();
                    let v = init_once(&cell, &lock, || {
                        std::thread::sleep(Duration::from_millis(20));
                        Ok(builds.fetch_add(1, Ordering::SeqCst))
                    })
                    .unwrap();
                    assert_eq!(*v, 0);
                });
            }
        });
        assert_eq!(builds.load(Ordering::SeqCst), 1);
        // A failed build leaves the cell empty for the next caller.
        let cell: OnceLock<u64> = OnceLock::new();
        assert!(init_once(&cell, &lock, || Err(Error::invalid("no"))).is_err());
        assert_eq!(*init_once(&cell, &lock, || Ok(7)).unwrap(), 7);
        // And the real runtime, first used from inside other runtimes.
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .build()
                        .unwrap();
                    rt.block_on(async { runtime().map(|r| r as *const _ as usize).unwrap() })
                });
            }
        });
    }

    #[test]
    fn debug_of_the_options_prints_keys_and_redacts_secrets() {
        let o = RemoteOptions::default()
            .config("aws_access_key_id", "AKIDSECRET1")
            .config("aws_secret_access_key", "SECRET2")
            .config("aws_session_token", "SECRET3")
            .config("azure_storage_sas_key", "sv=1&sig=SECRET4")
            .config("azure_storage_account_key", "SECRET5")
            .config("google_service_account_key", "SECRET6")
            .config("aws_region", "eu-west-1")
            .config(
                "aws_endpoint",
                "http://user:SECRET7@127.0.0.1:9000/?tok=SECRET8",
            )
            .config("AWS_ALLOW_HTTP", "true");
        let d = format!("{o:?}");
        assert!(!d.contains("SECRET"), "{d}");
        for shown in [
            "aws_secret_access_key",
            "aws_session_token",
            "azure_storage_sas_key",
            "eu-west-1",
            "http://127.0.0.1:9000/",
            "\"true\"",
            "<redacted>",
            "block_bytes",
        ] {
            assert!(d.contains(shown), "{shown}: {d}");
        }
    }

    #[test]
    fn blocks_of_two_block_sizes_in_one_directory_never_mix() {
        use crate::{CreateOptions, DType, DynDense, DynDenseWriter};
        let dir = tempfile::tempdir().unwrap();
        let mem: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        // One raw shard of 12288 bytes: block 1 of 8192-byte blocks is 4096
        // bytes long, as is block 1 of 4096-byte blocks (other bytes).
        let path = dir.path().join("s");
        let opts = CreateOptions::new(Codec::Raw).data_shards(1);
        let mut w = DynDenseWriter::create(&path, DType::U8, &[1024], &opts).unwrap();
        w.append_bytes(&bytes(3, 12 * 1024), 12).unwrap();
        w.close().unwrap();
        assert_eq!(StoreReader::open(&path).unwrap().tails(), [12288]);
        push_in_memory(&mem, &path, "s");
        let local = DynDense::open(&path).unwrap();
        let all: Vec<u64> = (0..12).collect();
        let cache = dir.path().join("cache");
        for bs in [4096, 8192, 4096] {
            let o = RemoteOptions::default()
                .memory_cache_bytes(0)
                .cache_dir(Some(cache.clone()))
                .block_bytes(bs);
            let remote =
                DynDense::from_engine(open_target(in_memory(&mem, "s"), &o).unwrap()).unwrap();
            assert_eq!(
                remote.gather_bytes(&all).unwrap(),
                local.gather_bytes(&all).unwrap(),
                "{bs}-byte blocks"
            );
        }
    }

    #[test]
    fn a_stale_dict_from_an_aborted_push_does_not_spoil_a_later_push() {
        use crate::{CreateOptions, DType, DynDense, DynDenseWriter};
        let dir = tempfile::tempdir().unwrap();
        let mem: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let t = in_memory(&mem, "s");
        block_on(mem.put(
            &t.object(DICT_FILE),
            PutPayload::from_static(b"old dictionary"),
        ))
        .unwrap()
        .unwrap();
        let path = dir.path().join("s");
        let mut w =
            DynDenseWriter::create(&path, DType::U8, &[8], &CreateOptions::new(Codec::Zstd))
                .unwrap();
        w.append_bytes(&bytes(1, 800), 100).unwrap();
        w.close().unwrap();
        push_in_memory(&mem, &path, "s");
        let o = RemoteOptions::default();
        let remote = DynDense::from_engine(open_target(in_memory(&mem, "s"), &o).unwrap()).unwrap();
        let local = DynDense::open(&path).unwrap();
        assert_eq!(
            remote.gather_bytes(&[0, 99]).unwrap(),
            local.gather_bytes(&[0, 99]).unwrap()
        );
        // The store id was written beside it.
        assert!(
            block_on(mem.head(&t.object(STORE_ID_FILE)))
                .unwrap()
                .is_ok()
        );
    }

    #[test]
    fn a_set_push_checks_every_target_before_uploading_anything() {
        use crate::{CreateOptions, DType, DynDenseWriter};
        let dir = tempfile::tempdir().unwrap();
        let mem: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let mut pending = Vec::new();
        for name in ["a", "b"] {
            let path = dir.path().join(name);
            let mut w =
                DynDenseWriter::create(&path, DType::U8, &[4], &CreateOptions::new(Codec::Raw))
                    .unwrap();
            w.append_bytes(&bytes(2, 40), 10).unwrap();
            w.close().unwrap();
            pending.push(path);
        }
        push_in_memory(&mem, &pending[1], "b");
        let list = |prefix: &str| -> Vec<String> {
            block_on(
                mem.list(Some(&ObjPath::from(prefix)))
                    .map_ok(|m| m.location.to_string())
                    .try_collect::<Vec<_>>(),
            )
            .unwrap()
            .unwrap()
        };
        let before = list("stores/b");
        let set = pending
            .iter()
            .zip(["a", "b"])
            .map(|(p, n)| Pending {
                path: p.clone(),
                reader: StoreReader::open(p).unwrap(),
                target: in_memory(&mem, n),
                uploaded: Vec::new(),
            })
            .collect();
        let e = push_pending(set, &RemoteOptions::default()).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::AlreadyExists { .. }), "{e}");
        assert!(list("stores/a").is_empty(), "nothing of a was uploaded");
        assert_eq!(list("stores/b"), before);
    }

    /// A small HTTP object server on 127.0.0.1 for tests: GET (of one
    /// range or whole), HEAD, PUT and DELETE of objects held in memory,
    /// one response per connection, without ETag or Last-Modified (as a
    /// plain web server), with injected faults.
    mod faulty {
        use std::collections::HashMap;
        use std::io::{Read, Write};
        use std::net::{SocketAddr, TcpListener, TcpStream};
        use std::sync::{Arc, Mutex};
        use std::time::Duration;

        /// What the server does wrong.
        #[derive(Clone, Debug)]
        pub(super) enum Fault {
            None,
            /// Every `n`-th GET sends half its body, then closes.
            Truncate(u32),
            /// Every `n`-th GET claims one byte fewer in Content-Length.
            ShortLength(u32),
            /// Every `n`-th GET sends half its body, then resets.
            Reset(u32),
            /// The first `n` requests fail with 503.
            Unavailable(u32),
            /// HEAD of a payload shard claims this many bytes more (or fewer).
            HeadLies(i64),
            /// HEAD of meta.zr claims 2^62 bytes, and its page a matching table.
            Huge,
            /// PUT of an object whose path ends so fails with 403.
            RefusePut(String),
        }

        pub(super) struct Server {
            addr: SocketAddr,
            pub(super) objects: Arc<Mutex<HashMap<String, Vec<u8>>>>,
            fault: Arc<Mutex<(Fault, u32)>>,
        }

        impl Server {
            pub(super) fn start() -> Server {
                let listener = TcpListener::bind("127.0.0.1:0").unwrap();
                let addr = listener.local_addr().unwrap();
                let objects = Arc::new(Mutex::new(HashMap::new()));
                let fault = Arc::new(Mutex::new((Fault::None, 0)));
                let (o, f) = (Arc::clone(&objects), Arc::clone(&fault));
                // Runs until the test process ends.
                std::thread::spawn(move || {
                    for c in listener.incoming().flatten() {
                        let (o, f) = (Arc::clone(&o), Arc::clone(&f));
                        std::thread::spawn(move || {
                            let _ = handle(c, &o, &f);
                        });
                    }
                });
                Server {
                    addr,
                    objects,
                    fault,
                }
            }

            pub(super) fn set(&self, f: Fault) {
                *self.fault.lock().unwrap() = (f, 0);
            }

            pub(super) fn url(&self, name: &str) -> String {
                format!("http://{}/s/{name}", self.addr)
            }

            /// Deletes every object of store `name`.
            pub(super) fn delete_store(&self, name: &str) {
                let prefix = format!("s/{name}/");
                self.objects
                    .lock()
                    .unwrap()
                    .retain(|k, _| !k.starts_with(&prefix));
            }
        }

        fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
            hay.windows(needle.len()).position(|w| w == needle)
        }

        /// A chunked body decoded, once it is complete.
        fn dechunk(mut b: &[u8]) -> Option<Vec<u8>> {
            let mut out = Vec::new();
            loop {
                let line = find(b, b"\r\n")?;
                let text = std::str::from_utf8(&b[..line]).ok()?;
                let n = usize::from_str_radix(text.split(';').next()?.trim(), 16).ok()?;
                b = &b[line + 2..];
                if n == 0 {
                    return Some(out);
                }
                out.extend_from_slice(b.get(..n)?);
                b = b.get(n + 2..)?;
            }
        }

        fn respond(c: &mut TcpStream, status: &str, headers: &[String], body: &[u8]) {
            let mut head = format!("HTTP/1.1 {status}\r\nConnection: close\r\n");
            for h in headers {
                head.push_str(h);
                head.push_str("\r\n");
            }
            if !headers.iter().any(|h| h.starts_with("Content-Length")) {
                head.push_str(&format!("Content-Length: {}\r\n", body.len()));
            }
            head.push_str("\r\n");
            let _ = c.write_all(head.as_bytes());
            let _ = c.write_all(body);
        }

        /// Closes `c` with a reset (SO_LINGER of zero).
        fn reset(c: TcpStream) {
            use std::os::fd::AsRawFd;
            let linger = libc::linger {
                l_onoff: 1,
                l_linger: 0,
            };
            // SAFETY: a valid socket descriptor owned by `c`, and a
            // `linger` of the size passed.
            unsafe {
                libc::setsockopt(
                    c.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_LINGER,
                    (&raw const linger).cast(),
                    std::mem::size_of::<libc::linger>() as libc::socklen_t,
                );
            }
            drop(c);
        }

        fn handle(
            mut c: TcpStream,
            objects: &Mutex<HashMap<String, Vec<u8>>>,
            fault: &Mutex<(Fault, u32)>,
        ) -> std::io::Result<()> {
            c.set_read_timeout(Some(Duration::from_secs(5)))?;
            let mut buf = Vec::new();
            let mut tmp = [0u8; 16384];
            let head_end = loop {
                if let Some(i) = find(&buf, b"\r\n\r\n") {
                    break i;
                }
                let n = c.read(&mut tmp)?;
                if n == 0 {
                    return Ok(());
                }
                buf.extend_from_slice(&tmp[..n]);
            };
            let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
            let mut lines = head.split("\r\n");
            let mut first = lines.next().unwrap_or("").split(' ');
            let method = first.next().unwrap_or("").to_string();
            let path = first
                .next()
                .unwrap_or("")
                .split('?')
                .next()
                .unwrap_or("")
                .trim_start_matches('/')
                .to_string();
            let headers: HashMap<String, String> = lines
                .filter_map(|l| l.split_once(':'))
                .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
                .collect();
            let mut body = buf[head_end + 4..].to_vec();
            if headers
                .get("transfer-encoding")
                .is_some_and(|v| v.contains("chunked"))
            {
                loop {
                    if let Some(d) = dechunk(&body) {
                        body = d;
                        break;
                    }
                    let n = c.read(&mut tmp)?;
                    if n == 0 {
                        return Ok(());
                    }
                    body.extend_from_slice(&tmp[..n]);
                }
            } else {
                let len: usize = headers
                    .get("content-length")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                while body.len() < len {
                    let n = c.read(&mut tmp)?;
                    if n == 0 {
                        return Ok(());
                    }
                    body.extend_from_slice(&tmp[..n]);
                }
                body.truncate(len);
            }
            let (fault, count) = {
                let mut f = fault.lock().unwrap();
                f.1 += 1;
                f.clone()
            };
            if let Fault::Unavailable(n) = fault
                && count <= n
            {
                respond(&mut c, "503 Service Unavailable", &[], b"busy");
                return Ok(());
            }
            match method.as_str() {
                "PUT" => {
                    if let Fault::RefusePut(suffix) = &fault
                        && path.ends_with(suffix.as_str())
                    {
                        respond(&mut c, "403 Forbidden", &[], b"refused");
                        return Ok(());
                    }
                    objects.lock().unwrap().insert(path, body);
                    respond(&mut c, "201 Created", &[], b"");
                }
                "DELETE" => match objects.lock().unwrap().remove(&path) {
                    Some(_) => respond(&mut c, "204 No Content", &[], b""),
                    None => respond(&mut c, "404 Not Found", &[], b""),
                },
                "HEAD" | "GET" => {
                    let Some(mut data) = objects.lock().unwrap().get(&path).cloned() else {
                        respond(&mut c, "404 Not Found", &[], b"");
                        return Ok(());
                    };
                    let huge = matches!(fault, Fault::Huge) && path.ends_with("/meta.zr");
                    let mut total = data.len() as u64;
                    if huge {
                        total = 1 << 62;
                        let records = (total - 4096) / 16;
                        data[..8].copy_from_slice(&records.to_le_bytes());
                    }
                    if method == "HEAD" {
                        if let Fault::HeadLies(d) = fault
                            && path.contains("/data_")
                        {
                            total = total.saturating_add_signed(d);
                        }
                        let h = [format!("Content-Length: {total}")];
                        respond(&mut c, "200 OK", &h, b"");
                        return Ok(());
                    }
                    let range = headers
                        .get("range")
                        .and_then(|r| r.strip_prefix("bytes="))
                        .and_then(|r| r.split_once('-'))
                        .and_then(|(a, b)| Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok())));
                    let (status, lo, hi) = match range {
                        None => ("200 OK", 0, data.len() as u64),
                        Some((a, b)) => {
                            let hi = b.map_or(total, |b| b + 1).min(data.len() as u64);
                            if a >= hi {
                                respond(&mut c, "416 Range Not Satisfiable", &[], b"");
                                return Ok(());
                            }
                            ("206 Partial Content", a, hi)
                        }
                    };
                    let part = &data[lo as usize..hi as usize];
                    let mut h = vec![];
                    if range.is_some() {
                        h.push(format!("Content-Range: bytes {lo}-{}/{total}", hi - 1));
                    }
                    let nth = |n: u32| n > 0 && count % n == 0;
                    match fault {
                        Fault::Truncate(n) if nth(n) => {
                            h.push(format!("Content-Length: {}", part.len()));
                            respond(&mut c, status, &h, &part[..part.len() / 2]);
                        }
                        Fault::ShortLength(n) if nth(n) => {
                            h.push(format!("Content-Length: {}", part.len().saturating_sub(1)));
                            respond(&mut c, status, &h, part);
                        }
                        Fault::Reset(n) if nth(n) => {
                            h.push(format!("Content-Length: {}", part.len()));
                            respond(&mut c, status, &h, &part[..part.len() / 2]);
                            let _ = c.flush();
                            reset(c);
                        }
                        _ => respond(&mut c, status, &h, part),
                    }
                }
                _ => respond(&mut c, "405 Method Not Allowed", &[], b""),
            }
            Ok(())
        }
    }

    /// Options for the fault server: small retries and timeouts.
    fn quick(o: RemoteOptions) -> RemoteOptions {
        o.retries(2)
            .backoff(Duration::from_millis(1))
            .retry_timeout(Duration::from_secs(2))
            .timeouts(Duration::from_secs(3), Duration::from_secs(1))
    }

    /// Runs `f` on a thread of its own and panics when it takes longer than
    /// a generous bound (a hang) or panics.
    fn within_30_s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(Duration::from_secs(30))
            .expect("finished within 30 s without panicking")
    }

    /// A raw Dense store of `n` records of 512 bytes, from `seed`, in 3 shards.
    fn raw_store(path: &Path, n: usize, seed: u64) {
        use crate::{CreateOptions, DType, DynDenseWriter};
        let opts = CreateOptions::new(Codec::Raw).data_shards(3);
        let mut w = DynDenseWriter::create(path, DType::U8, &[512], &opts).unwrap();
        w.append_bytes(&bytes(seed, n * 512), n).unwrap();
        w.close().unwrap();
    }

    #[test]
    fn every_gather_from_a_faulty_server_is_right_or_a_typed_error_in_bounded_time() {
        use crate::DynDense;
        use faulty::{Fault, Server};
        let server = Arc::new(Server::start());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        raw_store(&path, 600, 1);
        push(&path, &server.url("s"), &quick(RemoteOptions::default())).unwrap();
        let want = DynDense::open(&path)
            .unwrap()
            .gather_bytes(&(0..600).collect::<Vec<_>>())
            .unwrap();
        let mut right = 0;
        for fault in [
            Fault::None,
            Fault::Truncate(2),
            Fault::Truncate(1),
            Fault::ShortLength(2),
            Fault::ShortLength(1),
            Fault::Reset(2),
            Fault::Reset(1),
            Fault::Unavailable(2),
            Fault::Unavailable(1000),
            Fault::HeadLies(100),
            Fault::HeadLies(-100),
        ] {
            for cached in [false, true] {
                server.set(fault.clone());
                let (server, want) = (Arc::clone(&server), want.clone());
                let cache = dir.path().join(format!("cache-{fault:?}-{cached}"));
                let what = format!("{fault:?}, cached {cached}");
                let got = within_30_s(move || {
                    let mut o = quick(RemoteOptions::default()).max_request_bytes(64 << 10);
                    o = if cached {
                        o.block_bytes(16 << 10).cache_dir(Some(cache))
                    } else {
                        o.no_cache()
                    };
                    let s = DynDense::from_engine(crate::remote::open(&server.url("s"), &o)?)?;
                    // Three gathers: scattered, reversed, then all again.
                    for idx in [
                        scattered(600, 200, 3),
                        (0..600).rev().collect(),
                        (0..600).collect(),
                    ] {
                        let got = s.gather_bytes(&idx)?;
                        let rows: Vec<&[u8]> = idx
                            .iter()
                            .map(|&i| &want[i as usize * 512..(i as usize + 1) * 512])
                            .collect();
                        assert_eq!(got, rows.concat(), "wrong bytes");
                    }
                    Ok::<_, Error>(())
                });
                match got {
                    Ok(()) => right += 1,
                    Err(e) => assert!(
                        matches!(
                            e.kind(),
                            ErrorKind::Remote { .. } | ErrorKind::Corrupt { .. }
                        ),
                        "{what}: {e}"
                    ),
                }
            }
        }
        // No fault, a lying HEAD that claims more, and a short burst of 503s
        // are served right.
        assert!(right >= 6, "{right}");
    }

    #[test]
    fn a_server_claiming_an_enormous_meta_zr_is_refused_before_any_allocation() {
        use faulty::{Fault, Server};
        let server = Server::start();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        raw_store(&path, 10, 1);
        let o = quick(RemoteOptions::default());
        push(&path, &server.url("s"), &o).unwrap();
        server.set(Fault::Huge);
        let url = server.url("s");
        let e = within_30_s(move || crate::remote::open(&url, &o).map(|_| ()).unwrap_err());
        assert!(matches!(e.kind(), ErrorKind::Corrupt { .. }), "{e}");
        assert!(e.to_string().contains("max_table_bytes"), "{e}");
        // The bound is an option: a real table over it is refused too.
        server.set(Fault::None);
        let o = quick(RemoteOptions::default()).max_table_bytes(100);
        let e = crate::remote::open(&server.url("s"), &o)
            .map(|_| ())
            .unwrap_err();
        assert!(e.to_string().contains("160 bytes (10 records)"), "{e}");
        assert!(crate::remote::open(&server.url("s"), &o.max_table_bytes(160)).is_ok());
    }

    #[test]
    fn a_store_republished_with_the_same_shape_is_never_served_from_old_blocks() {
        use crate::DynDense;
        use faulty::Server;
        let server = Server::start();
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        let o = quick(RemoteOptions::default())
            .memory_cache_bytes(0)
            .block_bytes(4096)
            .cache_dir(Some(cache.clone()));
        let all: Vec<u64> = (0..50).collect();
        for seed in [1, 2] {
            let path = dir.path().join(format!("s{seed}"));
            raw_store(&path, 50, seed);
            server.delete_store("s");
            push(&path, &server.url("s"), &o).unwrap();
            let local = DynDense::open(&path).unwrap().gather_bytes(&all).unwrap();
            for pass in 0..2 {
                let remote = DynDense::open_url(&server.url("s"), &o).unwrap();
                assert_eq!(
                    remote.gather_bytes(&all).unwrap(),
                    local,
                    "store {seed}, pass {pass}"
                );
                if pass == 1 {
                    let st = remote.remote_stats().unwrap();
                    assert!(st.disk_hits > 0 && st.misses == 0, "{st:?}");
                }
            }
        }
        // A damaged block in the directory is a miss, not data.
        let mut files = Vec::new();
        for d in std::fs::read_dir(cache.join(CACHE_SUBDIR))
            .unwrap()
            .flatten()
        {
            if d.file_type().unwrap().is_dir() {
                files.extend(
                    std::fs::read_dir(d.path())
                        .unwrap()
                        .flatten()
                        .map(|f| f.path()),
                );
            }
        }
        assert!(!files.is_empty());
        for f in &files {
            let mut raw = std::fs::read(f).unwrap();
            raw[0] ^= 0xff;
            std::fs::write(f, raw).unwrap();
        }
        let path = dir.path().join("s2");
        let local = DynDense::open(&path).unwrap().gather_bytes(&all).unwrap();
        let remote = DynDense::open_url(&server.url("s"), &o).unwrap();
        assert_eq!(remote.gather_bytes(&all).unwrap(), local);
        assert_eq!(remote.remote_stats().unwrap().disk_hits, 0);
    }

    #[test]
    fn a_set_push_that_fails_part_way_publishes_nothing_and_says_what_remains() {
        use faulty::{Fault, Server};
        let server = Server::start();
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        raw_store(&a, 20, 1);
        raw_store(&b, 20, 2);
        let o = quick(RemoteOptions::default());
        // The second store's meta.zr is refused: the first one's, written
        // before it, is deleted again.
        server.set(Fault::RefusePut("b/meta.zr".into()));
        let set = [(&a, server.url("set/a")), (&b, server.url("set/b"))];
        let e = push_stores(&set, &o).unwrap_err();
        let ErrorKind::PushFailed { path, remains, .. } = e.kind() else {
            panic!("{e}");
        };
        assert!(path.ends_with("set/b"), "{}", path.display());
        assert!(
            remains.contains("meta.zr written and deleted again"),
            "{remains}"
        );
        assert!(
            remains.contains("no meta.zr of this push is left"),
            "{remains}"
        );
        assert!(remains.contains("data_2.zr"), "{remains}");
        let objects: Vec<String> = server.objects.lock().unwrap().keys().cloned().collect();
        assert!(
            !objects.iter().any(|k| k.ends_with("meta.zr")),
            "{objects:?}"
        );
        assert!(crate::remote::open(&server.url("set/a"), &o).is_err());
        // A shard refused: nothing of a later store is uploaded, no meta.zr.
        server.set(Fault::RefusePut("a/data_1.zr".into()));
        let e = push_stores(&set, &o).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::PushFailed { .. }), "{e}");
        assert!(
            e.to_string().contains("no meta.zr of this push is left"),
            "{e}"
        );
        // Then the set goes up whole.
        server.set(Fault::None);
        let r = push_stores(&set, &o).unwrap();
        assert_eq!(r.objects, 2 * 5);
        for u in [server.url("set/a"), server.url("set/b")] {
            assert!(crate::remote::open(&u, &o).is_ok(), "{u}");
        }
    }

    #[test]
    fn credentials_and_queries_in_a_url_never_reach_a_message() {
        use faulty::{Fault, Server};
        let server = Server::start();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        raw_store(&path, 10, 1);
        let o = quick(RemoteOptions::default());
        push(&path, &server.url("s"), &o).unwrap();
        let secret = |u: String| u.replace("http://", "http://user:SECRET1@") + "?sig=SECRET2";
        let e = crate::remote::open(&secret(server.url("none")), &o)
            .map(|_| ())
            .unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::NotAStore { .. }), "{e}");
        let r = crate::remote::open(&secret(server.url("s")), &o).unwrap();
        server.set(Fault::Unavailable(1000));
        let e2 = crate::remote::open(&secret(server.url("s")), &o)
            .map(|_| ())
            .unwrap_err();
        let e3 = target("ftp://u:SECRET3@h/x?k=SECRET4", &o)
            .map(|_| ())
            .unwrap_err();
        for m in [
            e.to_string(),
            e2.to_string(),
            e3.to_string(),
            format!("{:?}", r.path()),
        ] {
            assert!(!m.contains("SECRET") && !m.contains("user"), "{m}");
        }
    }

    /// An object store whose multipart uploads fail at part `fail_at` (0
    /// based) and remember whether they were aborted; everything else is
    /// the in-memory store's.
    #[derive(Debug)]
    struct FailingParts {
        inner: object_store::memory::InMemory,
        fail_at: usize,
        aborted: Arc<std::sync::atomic::AtomicBool>,
    }

    impl std::fmt::Display for FailingParts {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "FailingParts({})", self.inner)
        }
    }

    #[derive(Debug)]
    struct FailingUpload {
        inner: Box<dyn object_store::MultipartUpload>,
        parts: usize,
        fail_at: usize,
        aborted: Arc<std::sync::atomic::AtomicBool>,
    }

    #[async_trait::async_trait]
    impl object_store::MultipartUpload for FailingUpload {
        fn put_part(&mut self, data: PutPayload) -> object_store::UploadPart {
            let k = self.parts;
            self.parts += 1;
            if k == self.fail_at {
                return Box::pin(async move {
                    Err(object_store::Error::Generic {
                        store: "FailingParts",
                        source: format!("part {k} refused").into(),
                    })
                });
            }
            self.inner.put_part(data)
        }
        async fn complete(&mut self) -> object_store::Result<object_store::PutResult> {
            self.inner.complete().await
        }
        async fn abort(&mut self) -> object_store::Result<()> {
            self.aborted.store(true, Ordering::SeqCst);
            self.inner.abort().await
        }
    }

    #[async_trait::async_trait]
    impl ObjectStore for FailingParts {
        async fn put_opts(
            &self,
            location: &ObjPath,
            payload: PutPayload,
            opts: object_store::PutOptions,
        ) -> object_store::Result<object_store::PutResult> {
            self.inner.put_opts(location, payload, opts).await
        }
        async fn put_multipart_opts(
            &self,
            location: &ObjPath,
            opts: object_store::PutMultipartOptions,
        ) -> object_store::Result<Box<dyn object_store::MultipartUpload>> {
            Ok(Box::new(FailingUpload {
                inner: self.inner.put_multipart_opts(location, opts).await?,
                parts: 0,
                fail_at: self.fail_at,
                aborted: Arc::clone(&self.aborted),
            }))
        }
        async fn get_opts(
            &self,
            location: &ObjPath,
            options: object_store::GetOptions,
        ) -> object_store::Result<object_store::GetResult> {
            self.inner.get_opts(location, options).await
        }
        fn delete_stream(
            &self,
            locations: futures::stream::BoxStream<'static, object_store::Result<ObjPath>>,
        ) -> futures::stream::BoxStream<'static, object_store::Result<ObjPath>> {
            self.inner.delete_stream(locations)
        }
        fn list(
            &self,
            prefix: Option<&ObjPath>,
        ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::ObjectMeta>>
        {
            self.inner.list(prefix)
        }
        async fn list_with_delimiter(
            &self,
            prefix: Option<&ObjPath>,
        ) -> object_store::Result<object_store::ListResult> {
            self.inner.list_with_delimiter(prefix).await
        }
        async fn copy_opts(
            &self,
            from: &ObjPath,
            to: &ObjPath,
            options: object_store::CopyOptions,
        ) -> object_store::Result<()> {
            self.inner.copy_opts(from, to, options).await
        }
    }

    #[test]
    fn a_failed_multipart_upload_is_aborted_and_leaves_no_object() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shard");
        std::fs::write(&path, bytes(5, 10_000)).unwrap();
        let o = RemoteOptions {
            part_bytes: 1000,
            ..RemoteOptions::default()
        };
        for fail_at in [0, 3, 9] {
            let aborted = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let mem: Arc<dyn ObjectStore> = Arc::new(FailingParts {
                inner: object_store::memory::InMemory::new(),
                fail_at,
                aborted: Arc::clone(&aborted),
            });
            let t = in_memory(&mem, "s");
            let e = upload(&t, &o, &path, "data_0.zr", 10_000).unwrap_err();
            assert!(e.to_string().contains("data_0.zr"), "{e}");
            assert!(
                aborted.load(Ordering::SeqCst),
                "part {fail_at} failed and the upload was not aborted"
            );
            assert!(
                block_on(mem.head(&t.object("data_0.zr"))).unwrap().is_err(),
                "a failed upload left the object"
            );
        }
        // With no part failing, the same upload completes and is not aborted.
        let aborted = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mem: Arc<dyn ObjectStore> = Arc::new(FailingParts {
            inner: object_store::memory::InMemory::new(),
            fail_at: usize::MAX,
            aborted: Arc::clone(&aborted),
        });
        let t = in_memory(&mem, "s");
        upload(&t, &o, &path, "data_0.zr", 10_000).unwrap();
        assert!(!aborted.load(Ordering::SeqCst));
        let got = block_on(async { mem.get(&t.object("data_0.zr")).await?.bytes().await })
            .unwrap()
            .unwrap();
        assert_eq!(&got[..], &bytes(5, 10_000)[..]);
    }
}
