//! Publishing local stores to object storage: payload first, `meta.zr`
//! last and only if absent, undone on failure.

#[allow(clippy::wildcard_imports)]
use super::*;

/// What [`push`] or [`push_stores`] uploaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PushReport {
    /// Objects written (`meta.zr`, shards, dictionary, store id, sidecar
    /// files).
    pub objects: usize,
    /// Bytes of the store files and sidecar files written (the store id
    /// not counted).
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
pub(super) struct Pending {
    pub(super) path: PathBuf,
    pub(super) reader: StoreReader,
    pub(super) target: Target,
    /// Objects uploaded so far, for the error of a failed push.
    pub(super) uploaded: Vec<String>,
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
    push_stores_with_files::<P, U, &Path, &str>(stores, &[], o)
}

/// [`push_stores`] of `stores` with the small local files `files`,
/// `(file, object URL)`, published with them: a converted root's sidecar
/// files (the column-name mapping, the class names) beside its stores.
/// They are uploaded after every target was checked and every store's
/// payload uploaded, before any `meta.zr`; like the payload, one of an
/// earlier failed push is overwritten, and a failed push names those it
/// wrote among what remains.
///
/// # Errors
/// As [`push_stores`]; [`ErrorKind::Io`] for a file that cannot be read,
/// found before anything was uploaded; [`ErrorKind::InvalidArgument`] for
/// an object URL without a file name.
pub fn push_stores_with_files<P: AsRef<Path>, U: AsRef<str>, F: AsRef<Path>, V: AsRef<str>>(
    stores: &[(P, U)],
    files: &[(F, V)],
    o: &RemoteOptions,
) -> Result<PushReport, Error> {
    let mut extra = Vec::with_capacity(files.len());
    for (file, url) in files {
        let (file, url) = (file.as_ref(), url.as_ref());
        let Some((dir, name)) = url.trim_end_matches('/').rsplit_once('/') else {
            return Err(Error::invalid(format!(
                "{}: not an object URL",
                crate::redact_url(url)
            )));
        };
        // Read now: a missing file is found before anything is uploaded.
        let len = std::fs::metadata(file)
            .map_err(|e| Error::io(file, e))?
            .len();
        let body = read_file(file, len)?;
        extra.push(Sidecar {
            body,
            target: target(dir, o)?,
            name: name.to_string(),
        });
    }
    let mut pending = Vec::with_capacity(stores.len());
    for (store, url) in stores {
        let store = store.as_ref();
        // Not opened as a local path: its name would reach the message.
        if crate::is_url(&store.to_string_lossy()) {
            return Err(Error::invalid(format!(
                "{}: push uploads a local store; its source is a URL",
                crate::redact_url(&store.to_string_lossy())
            )));
        }
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
    push_pending(pending, extra, o)
}

/// A small file published beside a set of stores: its bytes, read before
/// the push, and the object it becomes.
pub(super) struct Sidecar {
    pub(super) body: Vec<u8>,
    pub(super) target: Target,
    pub(super) name: String,
}

/// [`push_stores_with_files`] of checked local stores and read files.
pub(super) fn push_pending(
    mut pending: Vec<Pending>,
    files: Vec<Sidecar>,
    o: &RemoteOptions,
) -> Result<PushReport, Error> {
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
            return Err(push_failed(url, e, &pending, &[], &[], &[]));
        }
    }
    // The sidecar files, still before any meta.zr.
    let mut sidecars: Vec<String> = Vec::new();
    for f in files {
        let t = &f.target;
        let len = f.body.len() as u64;
        let put = block_on(t.store.put(&t.object(&f.name), PutPayload::from(f.body)))
            .and_then(|r| r.map_err(|e| t.err(&f.name, None, e)));
        if let Err(e) = put {
            let url = t.url_of(&f.name);
            return Err(push_failed(url, e, &pending, &sidecars, &[], &[]));
        }
        sidecars.push(t.url_of(&f.name).display().to_string());
        report.objects += 1;
        report.bytes += len;
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
                return Err(push_failed(url, e, &pending, &sidecars, &undone, &kept));
            }
        }
    }
    drop(pending);
    Ok(report)
}

/// The error of a push that failed after uploading began: `error`, and
/// what remains (`sidecars`: the URLs of the sidecar files written;
/// `undone`: stores whose `meta.zr` was deleted again; `kept`: stores
/// whose `meta.zr` could not be).
pub(super) fn push_failed(
    path: PathBuf,
    error: Error,
    pending: &[Pending],
    sidecars: &[String],
    undone: &[usize],
    kept: &[usize],
) -> Error {
    let mut parts: Vec<String> = Vec::new();
    for p in pending.iter().filter(|p| !p.uploaded.is_empty()) {
        parts.push(format!("{}: {}", p.target.url, p.uploaded.join(", ")));
    }
    if !sidecars.is_empty() {
        parts.push(format!("sidecar files {}", sidecars.join(", ")));
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
pub(super) fn meta_exists(t: &Target) -> Result<bool, Error> {
    match block_on(t.store.head(&t.object(META_FILE)))? {
        Ok(_) => Ok(true),
        Err(object_store::Error::NotFound { .. }) => Ok(false),
        Err(e) => Err(t.err(META_FILE, None, e)),
    }
}

/// Writes `meta.zr` only if absent (`PutMode::Create`; where the service
/// has no conditional write, as plain HTTP, after a check).
pub(super) fn put_meta(t: &Target, body: Vec<u8>) -> Result<(), Error> {
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
pub(super) fn push_payload(
    p: &mut Pending,
    o: &RemoteOptions,
    report: &mut PushReport,
) -> Result<(), Error> {
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
pub(super) fn new_store_id(path: &Path) -> String {
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
pub(super) fn read_file(path: &Path, len: u64) -> Result<Vec<u8>, Error> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    read_at(&file, path, 0, usize::try_from(len).unwrap_or(usize::MAX))
}

/// `n` bytes of `file` (at `path`) from `at`.
pub(super) fn read_at(file: &File, path: &Path, at: u64, n: usize) -> Result<Vec<u8>, Error> {
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
pub(super) fn upload(
    t: &Target,
    o: &RemoteOptions,
    path: &Path,
    name: &str,
    len: u64,
) -> Result<(), Error> {
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
