//! Object access: the runtime, a URL resolved to an object store and a
//! path, and the retry settings every request runs under.

#[allow(clippy::wildcard_imports)]
use super::*;

/// The internal runtime that drives `object_store`: built exactly once,
/// however many threads race on the first use (a second runtime built and
/// dropped inside an async context would panic).
pub(super) fn runtime() -> Result<&'static tokio::runtime::Runtime, Error> {
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
pub(super) fn init_once<'a, T>(
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
pub(super) fn block_on<F>(f: F) -> Result<F::Output, Error>
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
pub(super) struct Target {
    pub(super) store: Arc<dyn ObjectStore>,
    pub(super) prefix: ObjPath,
    /// The URL without a trailing slash, user information or query
    /// ([`crate::redact_url`]): for messages, and the store's path.
    pub(super) url: String,
}

impl Target {
    pub(super) fn object(&self, name: &str) -> ObjPath {
        self.prefix.clone().join(name)
    }

    pub(super) fn url_of(&self, name: &str) -> PathBuf {
        PathBuf::from(format!("{}/{name}", self.url))
    }

    pub(super) fn err(&self, name: &str, record: Option<u64>, e: impl std::fmt::Display) -> Error {
        ErrorKind::Remote {
            path: self.url_of(name),
            record,
            detail: crate::remote_url::redact_text(&e.to_string()),
        }
        .into()
    }
}

pub(super) fn target(url: &str, o: &RemoteOptions) -> Result<Target, Error> {
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
    let mut client = ClientOptions::new()
        .with_timeout(o.timeout)
        .with_connect_timeout(o.connect_timeout)
        .with_allow_http(parsed.scheme() == "http");
    if let (Some(token), ObjectStoreScheme::Http) = (&o.bearer_token, &scheme) {
        let mut value = object_store::HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| Error::invalid("the bearer token is not a valid header value"))?;
        value.set_sensitive(true);
        let mut headers = object_store::HeaderMap::new();
        headers.insert("authorization", value);
        client = client.with_default_headers(headers);
    }
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
pub(super) fn env_then_config<B: Clone>(
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
