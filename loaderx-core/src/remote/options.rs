//! Remote options: where credentials and limits come from.

#[allow(clippy::wildcard_imports)]
use super::*;

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
    pub(super) config: Vec<(String, String)>,
    pub(super) cache_dir: Option<PathBuf>,
    pub(super) cache_bytes: u64,
    pub(crate) memory_cache_bytes: u64,
    pub(crate) block_bytes: u64,
    pub(super) max_table_bytes: u64,
    pub(super) gap_bytes: u64,
    pub(super) max_request_bytes: u64,
    pub(crate) concurrency: usize,
    pub(super) part_bytes: usize,
    pub(super) retries: usize,
    pub(super) backoff: Duration,
    pub(super) retry_timeout: Duration,
    pub(super) timeout: Duration,
    pub(super) connect_timeout: Duration,
    /// A bearer token sent with every HTTP(S) request.
    pub(super) bearer_token: Option<String>,
}

/// `object_store` configuration keys whose values hold no secret, by the
/// end of their name (`aws_region`, `region`, `aws_endpoint_url`, …).
pub(super) const PUBLIC_CONFIG: [&str; 16] = [
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
pub(super) fn config_for_debug(key: &str, value: &str) -> String {
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
            .field(
                "bearer_token",
                &self.bearer_token.as_ref().map(|_| "<redacted>"),
            )
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
            bearer_token: None,
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

    /// Sends `Authorization: Bearer TOKEN` with every request to an
    /// `http(s)://` URL (a Hugging Face Hub token, say); never printed.
    pub fn bearer_token(mut self, token: Option<String>) -> Self {
        self.bearer_token = token;
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
