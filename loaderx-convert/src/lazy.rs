//! Parquet datasets opened where they live: on the Hugging Face Hub
//! (`hf://datasets/ORG/NAME[@REVISION]`), in a bucket (`s3://`, `gs://`,
//! `az://` prefixes or globs), on a web server (`https://…/x.parquet`) or
//! on a local disk, trained on with no conversion step (feature `lazy`).
//!
//! [`open`] reads the parquet files' footers only (a ranged read or two
//! each): their row groups, row counts and schema. Each row group is a
//! part of a [`Dataset`] ([`Dataset::lazy`]): the first time a batch needs
//! one (a gather, or the loader's look-ahead, which knows every future
//! batch), its bytes are fetched (ranged GETs, several in flight) and
//! converted with the same column rules as [`crate::local::convert_parquet`]
//! and [`crate::hf::convert_hf`] (one Arrow layer) into a cache directory
//! bounded in bytes ([`OpenOptions::cache_bytes`]). Train with
//! [`SamplerMode::PartWindowed`](loaderx_core::SamplerMode::PartWindowed):
//! a global order over (row group, row), each row group fetched once a
//! pass while its window is open, exactly resumable like every order.
//!
//! **Pinned.** The Hub revision is resolved to a commit and every file is
//! read at that commit; every object's ETag or version (a local file's size
//! and modification time) is recorded in the cache directory
//! (`source.json`) and every read asks for that version, so a source that
//! changed is an error naming the file, never new data mixed with old.
//!
//! **Images** are stored encoded (as `--encoded` converts them): decode and
//! augment them on the loader's workers
//! ([`DataLoaderBuilder::augment`](loaderx_core::DataLoaderBuilder)).
//!
//! **Freezing.** [`Dataset::freeze`](loaderx_core::Dataset::freeze)
//! (`loaderx dataset freeze`) converts the row groups not in the cache yet
//! and links every one into a multi-part dataset whose streams' digests
//! are those of `loaderx convert` of the same files (with `--encoded` for
//! images).
//!
//! **The default cache** is keyed by the source, its options and the
//! versions of its files (the Hub commit, every ETag), so a branch that
//! moved gets a new cache; an explicit [`OpenOptions::cache_dir`] filled
//! from another version is an error. The bound holds for one process:
//! ranks sharing a cache directory each count their own row groups.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use loaderx_core::lazy::{LazyOptions, PartSource};
use loaderx_core::{Dataset, RemoteObject, RemoteOptions};
use serde_json::{Value, json};
use sha2::Digest as _;

use crate::error::Error;
use crate::hf::HfSource;
use crate::local::Kind;
use crate::parquet_file::file::ParquetFile;
use crate::table::{SplitTables, TableOptions, TableSource, convert_tables};

/// The file that pins a cache directory to the version of the source it
/// was filled from.
pub const SOURCE_FILE: &str = "source.json";

/// Bytes read from the end of a file to find its footer in one request.
const TAIL_BYTES: u64 = 64 << 10;

/// The largest footer read (the parquet crate's own limit is far below).
const MAX_FOOTER: u64 = 256 << 20;

/// Bytes of one ranged request of a row group's fetch.
const REQUEST_BYTES: u64 = 8 << 20;

/// How [`open`] finds, reads, converts and caches a dataset.
#[derive(Debug, Clone)]
#[must_use]
pub struct OpenOptions {
    table: TableOptions,
    split: Option<String>,
    config: Option<String>,
    token: Option<String>,
    endpoint: Option<String>,
    hub_cache: Option<PathBuf>,
    cache_dir: Option<PathBuf>,
    cache_bytes: u64,
    concurrency: usize,
    remote: RemoteOptions,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions::new()
    }
}

impl OpenOptions {
    /// The `train` split of a Hub dataset (every file of any other
    /// source), the table layer's default column rules with images encoded,
    /// the cache under `LOADERX_CACHE_DIR` (else `~/.cache/loaderx`) in
    /// `lazy/<a hash of the source and options>`, bounded to 32 GiB, 4 row
    /// groups fetched at once, object storage reached with
    /// [`RemoteOptions::from_env`].
    pub fn new() -> OpenOptions {
        OpenOptions {
            table: TableOptions::new(),
            split: None,
            config: None,
            token: None,
            endpoint: None,
            hub_cache: None,
            cache_dir: None,
            cache_bytes: 32 << 30,
            concurrency: 4,
            remote: RemoteOptions::from_env(),
        }
    }

    /// The column rules (selection, text, codec…) of the table layer;
    /// images are always stored encoded.
    pub fn table(mut self, table: TableOptions) -> OpenOptions {
        self.table = table;
        self
    }

    /// The Hub split (default `train`).
    pub fn split(mut self, split: impl Into<String>) -> OpenOptions {
        self.split = Some(split.into());
        self
    }

    /// The Hub config (subset): default as `convert hf` picks it.
    pub fn config(mut self, config: impl Into<String>) -> OpenOptions {
        self.config = Some(config.into());
        self
    }

    /// A Hub token (default: `HF_TOKEN`, then the token file, as `convert
    /// hf` finds it).
    pub fn token(mut self, token: impl Into<String>) -> OpenOptions {
        self.token = Some(token.into());
        self
    }

    /// The Hub's address (default: `HF_ENDPOINT`, else the public Hub).
    pub fn endpoint(mut self, endpoint: impl Into<String>) -> OpenOptions {
        self.endpoint = Some(endpoint.into());
        self
    }

    /// Where Hub metadata (the dataset card) is downloaded (default: the
    /// Hugging Face cache).
    pub fn hub_cache(mut self, dir: impl Into<PathBuf>) -> OpenOptions {
        self.hub_cache = Some(dir.into());
        self
    }

    /// The cache directory of converted row groups.
    pub fn cache_dir(mut self, dir: impl Into<PathBuf>) -> OpenOptions {
        self.cache_dir = Some(dir.into());
        self
    }

    /// Bounds the cache to `bytes` (at least one row group is kept).
    pub fn cache_bytes(mut self, bytes: u64) -> OpenOptions {
        self.cache_bytes = bytes;
        self
    }

    /// Row groups fetched and converted at once (at least 1).
    pub fn concurrency(mut self, n: usize) -> OpenOptions {
        self.concurrency = n.max(1);
        self
    }

    /// How object storage and web servers are reached.
    pub fn remote(mut self, remote: RemoteOptions) -> OpenOptions {
        self.remote = remote;
        self
    }
}

/// True for what only [`open`] reads (never a converted dataset): an
/// `hf://` address, or a URL of a `.parquet` object or with a wildcard. A
/// URL prefix ending in `/` may be either: a dataset's when it holds a
/// manifest.
pub fn is_lazy_location(location: &str) -> bool {
    let http = location.starts_with("http://") || location.starts_with("https://");
    let path = if http {
        location.split('?').next().unwrap_or(location)
    } else {
        location
    };
    location.starts_with("hf://")
        || (loaderx_core::is_url(location)
            && (path.ends_with(".parquet") || path.contains('*') || (!http && path.contains('?'))))
}

/// The dataset at `location`, its row groups converted as training needs
/// them (see the [module documentation](self)): an `hf://datasets/ORG/NAME`
/// address (`@REVISION` a branch, tag or commit; default `main`), an
/// `s3://`, `gs://`, `az://` or `http(s)://` parquet file, prefix (ending
/// in `/`: every `.parquet` object under it) or glob (`*`, `?`), or a local
/// parquet file, directory or glob.
///
/// ```no_run
/// use loaderx_convert::lazy::{OpenOptions, open};
/// let dataset = open("hf://datasets/ylecun/mnist", &OpenOptions::new().cache_bytes(8 << 30))?;
/// println!("{} records in {} row groups", dataset.len(), dataset.parts().len());
/// # Ok::<(), loaderx_convert::Error>(())
/// ```
///
/// # Errors
///
/// [`Error::Hub`], [`Error::Layout`], [`Error::UnknownConfig`] and
/// [`Error::UnknownSplit`] as `convert hf`; [`Error::Store`] holding
/// [`ErrorKind::Remote`](loaderx_core::ErrorKind::Remote) for an object
/// that cannot be read; [`Error::Source`] for a file that is not parquet,
/// or files whose columns differ; [`Error::InvalidOption`] for a cache
/// directory filled from another version of the source; what converting
/// the first row group returns.
pub fn open(location: &str, options: &OpenOptions) -> Result<Dataset, Error> {
    if options.table.drop_null_rows || options.table.drop_empty_rows || options.table.part.is_some()
    {
        return Err(Error::invalid(
            "a dataset opened where it lives keeps every row (its row groups' counts are read \
             from the footers): drop_null_rows, drop_empty_rows and part are for `convert`",
        ));
    }
    let source = ParquetParts::open(location, options)?;
    let cache = match &options.cache_dir {
        Some(dir) => dir.clone(),
        None => default_cache(&source.identity)?,
    };
    source.pin(&cache)?;
    let lazy = LazyOptions::new(&cache)
        .cache_bytes(options.cache_bytes)
        .concurrency(options.concurrency);
    Ok(Dataset::lazy(Arc::new(source), &lazy)?)
}

/// `LOADERX_CACHE_DIR` (else `~/.cache/loaderx`) `/lazy/` and the first 16
/// hex digits of `identity`'s SHA-256.
fn default_cache(identity: &str) -> Result<PathBuf, Error> {
    let root = std::env::var_os("LOADERX_CACHE_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::home_dir().map(|h| h.join(".cache").join("loaderx")))
        .ok_or_else(|| {
            Error::invalid("no cache directory: set LOADERX_CACHE_DIR or pass a cache directory")
        })?;
    let hash = sha2::Sha256::digest(identity.as_bytes());
    let hex: String = hash[..8].iter().map(|b| format!("{b:02x}")).collect();
    Ok(root.join("lazy").join(hex))
}

/// One parquet file, wherever it is.
enum Object {
    Remote(RemoteObject),
    Local {
        path: PathBuf,
        len: u64,
        modified: Option<SystemTime>,
    },
}

impl Object {
    fn url(&self) -> String {
        match self {
            Object::Remote(o) => o.url().to_owned(),
            Object::Local { path, .. } => path.display().to_string(),
        }
    }

    fn len(&self) -> u64 {
        match self {
            Object::Remote(o) => o.len(),
            Object::Local { len, .. } => *len,
        }
    }

    /// What pins this version of it.
    fn pin(&self) -> Value {
        match self {
            Object::Remote(o) => json!({
                "url": o.url(),
                "size": o.len(),
                "etag": o.e_tag(),
                "version": o.version(),
            }),
            Object::Local {
                path,
                len,
                modified,
            } => json!({
                "path": path.display().to_string(),
                "size": len,
                "modified_ns": modified
                    .and_then(|m| m.duration_since(SystemTime::UNIX_EPOCH).ok())
                    .map(|d| d.as_nanos().to_string()),
            }),
        }
    }

    fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>, Error> {
        match self {
            Object::Remote(o) => Ok(o.read_ranges(ranges)?),
            Object::Local {
                path,
                len,
                modified,
            } => {
                use std::os::unix::fs::FileExt;
                let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
                let meta = file.metadata().map_err(|e| Error::io(path, e))?;
                if meta.len() != *len || meta.modified().ok() != *modified {
                    return Err(changed(&path.display().to_string()));
                }
                ranges
                    .iter()
                    .map(|r| {
                        let mut buf = vec![0u8; (r.end - r.start) as usize];
                        file.read_exact_at(&mut buf, r.start)
                            .map_err(|e| Error::io(path, e))?;
                        Ok(Bytes::from(buf))
                    })
                    .collect()
            }
        }
    }
}

fn changed(url: &str) -> Error {
    Error::invalid(format!(
        "{url}: the file changed since the dataset was opened; reopen it (a new cache)"
    ))
}

/// One file's footer, read once at open.
struct Footer {
    object: Object,
    /// Where `tail` starts in the file: the footer and its length and magic.
    tail_at: u64,
    tail: Bytes,
    label: String,
    /// Each row group's rows and stored byte range.
    groups: Vec<(u64, Range<u64>)>,
    schema: arrow_schema::SchemaRef,
}

/// A lazily converted parquet dataset's parts: the row groups of its files,
/// in order.
struct ParquetParts {
    name: String,
    /// What the source and its options are (the default cache's key).
    identity: String,
    files: Vec<Footer>,
    /// Part → (file, row group).
    parts: Vec<(usize, usize)>,
    table: TableOptions,
    context: String,
}

impl ParquetParts {
    fn open(location: &str, options: &OpenOptions) -> Result<ParquetParts, Error> {
        let (objects, context) = list(location, options)?;
        let files = in_parallel(objects, read_footer)?;
        let first = &files[0];
        for f in &files[1..] {
            if f.schema.fields() != first.schema.fields() {
                return Err(Error::Source {
                    file: f.label.clone(),
                    detail: format!("its columns differ from those of {}", first.label),
                });
            }
        }
        let mut parts = Vec::new();
        for (i, f) in files.iter().enumerate() {
            for (g, (rows, _)) in f.groups.iter().enumerate() {
                if *rows > 0 {
                    parts.push((i, g));
                }
            }
        }
        if parts.is_empty() {
            return Err(Error::invalid(format!(
                "{}: the files hold no row",
                loaderx_core::redact_url(location)
            )));
        }
        let table = options.table.clone().encoded_images(true).progress(false);
        // The files' versions too: a branch that moved is another cache.
        let pins: Vec<Value> = files.iter().map(|f| f.object.pin()).collect();
        let identity = format!(
            "{location}\n{:?}\n{:?}\n{:?}\n{table:?}\n{}",
            options.split,
            options.config,
            options.endpoint,
            Value::Array(pins)
        );
        Ok(ParquetParts {
            name: loaderx_core::redact_url(location),
            identity,
            files,
            parts,
            table,
            context,
        })
    }

    /// Records the source's version in `dir`, or checks it against the one
    /// recorded there.
    fn pin(&self, dir: &Path) -> Result<(), Error> {
        let pins = json!({
            "loaderx_lazy_source": 1,
            "source": self.name,
            "files": self.files.iter().map(|f| f.object.pin()).collect::<Vec<_>>(),
            "parts": self.parts.len(),
        });
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let path = dir.join(SOURCE_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => {
                let found: Value = serde_json::from_slice(&bytes).map_err(|e| {
                    Error::invalid(format!("{}: not a source record: {e}", path.display()))
                })?;
                if found != pins {
                    return Err(Error::invalid(format!(
                        "{}: this cache was filled from another version of {} (its files' \
                         versions differ): remove the directory or choose another cache",
                        dir.display(),
                        self.name
                    )));
                }
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let text = serde_json::to_vec_pretty(&pins)
                    .map_err(|e| Error::invalid(format!("cannot record the source: {e}")))?;
                let tmp = dir.join(format!(".{SOURCE_FILE}.{}", std::process::id()));
                std::fs::write(&tmp, text).map_err(|e| Error::io(&tmp, e))?;
                std::fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))
            }
            Err(e) => Err(Error::io(&path, e)),
        }
    }

    /// Fetches part `part`'s row group into a sparse copy of its file (the
    /// footer and that row group's bytes at their offsets) and converts it
    /// into `dir`.
    fn convert(&self, part: usize, dir: &Path) -> Result<(), Error> {
        let (f, g) = self.parts[part];
        let file = &self.files[f];
        let range = file.groups[g].1.clone();
        let mut ranges = Vec::new();
        let mut at = range.start;
        while at < range.end {
            let end = (at + REQUEST_BYTES).min(range.end);
            ranges.push(at..end);
            at = end;
        }
        let chunks = file.object.read_ranges(&ranges)?;
        let sparse = dir.with_extension("parquet");
        let root = dir.with_extension("root");
        let result = (|| -> Result<(), Error> {
            {
                use std::os::unix::fs::FileExt;
                let out = std::fs::File::create(&sparse).map_err(|e| Error::io(&sparse, e))?;
                out.set_len(file.object.len())
                    .map_err(|e| Error::io(&sparse, e))?;
                out.write_all_at(&file.tail, file.tail_at)
                    .map_err(|e| Error::io(&sparse, e))?;
                for (r, bytes) in ranges.iter().zip(&chunks) {
                    out.write_all_at(bytes, r.start)
                        .map_err(|e| Error::io(&sparse, e))?;
                }
            }
            let label = format!("{} row group {g}", file.label);
            let table = ParquetFile::open_row_group(&sparse, &label, g)?;
            let name = "part".to_owned();
            convert_tables(
                std::slice::from_ref(&name),
                || {
                    Ok(vec![SplitTables {
                        name: name.clone(),
                        partial: false,
                        tables: vec![Box::new(table) as Box<dyn TableSource>],
                    }])
                },
                &root,
                &self.table,
                &self.context,
                Vec::new(),
            )?;
            let converted = root.join(&name);
            std::fs::rename(&converted, dir).map_err(|e| Error::io(dir, e))
        })();
        let _ = std::fs::remove_file(&sparse);
        let _ = std::fs::remove_dir_all(&root);
        result
    }
}

impl PartSource for ParquetParts {
    fn name(&self) -> &str {
        &self.name
    }

    fn part_records(&self) -> Vec<u64> {
        self.parts
            .iter()
            .map(|&(f, g)| self.files[f].groups[g].0)
            .collect()
    }

    fn convert_part(
        &self,
        part: usize,
        dir: &Path,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        Ok(self.convert(part, dir)?)
    }
}

/// The objects `location` names, in order, and the context of messages.
fn list(location: &str, options: &OpenOptions) -> Result<(Vec<Object>, String), Error> {
    if let Some(rest) = location.strip_prefix("hf://") {
        return list_hub(rest, options);
    }
    if loaderx_core::is_url(location) {
        let found = RemoteObject::list(location, &options.remote)?;
        let objects: Vec<Object> = found
            .into_iter()
            .filter(|o| !location.ends_with('/') || o.url().ends_with(".parquet"))
            .map(Object::Remote)
            .collect();
        if objects.is_empty() {
            return Err(Error::invalid(format!(
                "{}: no .parquet object under it",
                loaderx_core::redact_url(location)
            )));
        }
        return Ok((objects, loaderx_core::redact_url(location)));
    }
    let path = Path::new(location);
    let paths = if location.contains(['*', '?', '[', '{']) {
        crate::local::expand_glob(location, Kind::Parquet)?
    } else if path.is_dir() {
        let mut out = Vec::new();
        crate::local::walk(path, Kind::Parquet, &mut out)?;
        out
    } else {
        vec![path.to_path_buf()]
    };
    if paths.is_empty() {
        return Err(Error::invalid(format!("{location}: no parquet file")));
    }
    let mut objects = Vec::with_capacity(paths.len());
    for p in paths {
        let meta = std::fs::metadata(&p).map_err(|e| Error::io(&p, e))?;
        objects.push(Object::Local {
            len: meta.len(),
            modified: meta.modified().ok(),
            path: p,
        });
    }
    Ok((objects, location.to_owned()))
}

/// The parquet files of `datasets/ORG/NAME[@REVISION]`'s split at the
/// commit its revision resolves to, as `https` objects of the Hub's
/// `resolve` endpoint.
fn list_hub(rest: &str, options: &OpenOptions) -> Result<(Vec<Object>, String), Error> {
    let Some(repo) = rest.strip_prefix("datasets/") else {
        return Err(Error::invalid(format!(
            "hf://{rest}: expected hf://datasets/ORG/NAME[@REVISION]"
        )));
    };
    let (repo, revision) = match repo.split_once('@') {
        Some((r, v)) => (r, Some(v)),
        None => (repo, None),
    };
    let split = options.split.clone().unwrap_or_else(|| "train".to_owned());
    let mut source = HfSource::new(repo).splits([split.clone()]);
    if let Some(v) = revision {
        source = source.revision(v);
    }
    if let Some(c) = &options.config {
        source = source.config(c.clone());
    }
    if let Some(t) = &options.token {
        source = source.token(t.clone());
    }
    if let Some(e) = &options.endpoint {
        source = source.endpoint(e.clone());
    }
    if let Some(c) = &options.hub_cache {
        source = source.cache_dir(c.clone());
    }
    let located = crate::hf::locate(&source, false)?;
    let files = located
        .chosen
        .iter()
        .find(|s| s.split == split)
        .map(|s| s.files.clone())
        .unwrap_or_default();
    if files.is_empty() {
        return Err(Error::invalid(format!(
            "hf://datasets/{repo}: split {split:?} has no parquet file"
        )));
    }
    let endpoint = crate::hub::endpoint_url(options.endpoint.as_deref());
    let remote = options
        .remote
        .clone()
        .bearer_token(crate::hub::find_token(options.token.as_deref()));
    let sha = &located.parquet_commit;
    let urls: Vec<String> = files
        .iter()
        .map(|f| {
            format!(
                "{endpoint}/datasets/{repo}/resolve/{sha}/{}",
                encode_path(f)
            )
        })
        .collect();
    let objects = in_parallel(urls, |url| {
        Ok(Object::Remote(RemoteObject::open(&url, &remote)?))
    })?;
    let context = format!("{repo}@{}", &sha[..12.min(sha.len())]);
    Ok((objects, context))
}

/// Files opened or footers read at once.
const AT_ONCE: usize = 16;

/// `f` of every item, at most [`AT_ONCE`] at a time, in order.
fn in_parallel<T: Send, U: Send>(
    items: Vec<T>,
    f: impl Fn(T) -> Result<U, Error> + Sync,
) -> Result<Vec<U>, Error> {
    let mut out = Vec::with_capacity(items.len());
    let mut items = items.into_iter().peekable();
    while items.peek().is_some() {
        let batch: Vec<T> = items.by_ref().take(AT_ONCE).collect();
        let done = std::thread::scope(|s| {
            let mut handles = Vec::with_capacity(batch.len());
            for item in batch {
                let f = &f;
                handles.push(
                    std::thread::Builder::new()
                        .spawn_scoped(s, move || f(item))
                        .map_err(|e| Error::io("a thread to read a footer", e))?,
                );
            }
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(Error::invalid("reading a footer panicked")))
                })
                .collect::<Result<Vec<U>, Error>>()
        })?;
        out.extend(done);
    }
    Ok(out)
}

/// `path` with every byte outside `A-Z a-z 0-9 - . _ ~ /` percent-encoded
/// (a Hub file name in a URL).
fn encode_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Reads `object`'s footer: one ranged read of its last 64 KiB, and one
/// more when the footer is longer.
fn read_footer(object: Object) -> Result<Footer, Error> {
    let label = object.url();
    let len = object.len();
    let bad = |detail: String| Error::Source {
        file: label.clone(),
        detail,
    };
    if len < 12 {
        return Err(bad(format!("{len} bytes: too short for a parquet file")));
    }
    let first = len.saturating_sub(TAIL_BYTES);
    let tail = object
        .read_ranges(std::slice::from_ref(&(first..len)))?
        .pop()
        .unwrap_or_default();
    let n = tail.len();
    if n < 8 || &tail[n - 4..] != b"PAR1" {
        return Err(bad("not a parquet file (no PAR1 at its end)".to_owned()));
    }
    let footer = u64::from(u32::from_le_bytes([
        tail[n - 8],
        tail[n - 7],
        tail[n - 6],
        tail[n - 5],
    ]));
    if footer > MAX_FOOTER || footer + 8 > len - 4 {
        return Err(bad(format!(
            "its footer declares {footer} bytes, more than the file or the {MAX_FOOTER} read"
        )));
    }
    let start = len - 8 - footer;
    let start_of_footer = start;
    let (tail_at, tail) = if start >= first {
        (first, tail)
    } else {
        let more = object
            .read_ranges(std::slice::from_ref(&(start..first)))?
            .pop()
            .unwrap_or_default();
        let mut whole = Vec::with_capacity(more.len() + tail.len());
        whole.extend_from_slice(&more);
        whole.extend_from_slice(&tail);
        (start, Bytes::from(whole))
    };
    // The footer read and checked as a local file's would be: a sparse
    // copy holding only it.
    let scratch = tempfile::Builder::new()
        .prefix(".loaderx-footer-")
        .suffix(".parquet")
        .tempfile()
        .map_err(|e| Error::io(std::env::temp_dir(), e))?;
    {
        use std::os::unix::fs::FileExt;
        let f = scratch.as_file();
        f.set_len(len).map_err(|e| Error::io(scratch.path(), e))?;
        f.write_all_at(&tail, tail_at)
            .map_err(|e| Error::io(scratch.path(), e))?;
    }
    let meta = ParquetFile::open_footer(scratch.path(), &label)?;
    let mut groups = Vec::with_capacity(meta.metadata().num_row_groups());
    for (g, group) in meta.metadata().row_groups().iter().enumerate() {
        let mut lo = u64::MAX;
        let mut hi = 0u64;
        for column in group.columns() {
            let start = column
                .dictionary_page_offset()
                .unwrap_or_else(|| column.data_page_offset());
            let (Ok(start), Ok(size)) = (
                u64::try_from(start),
                u64::try_from(column.compressed_size()),
            ) else {
                return Err(bad(format!("row group {g}: a negative offset or size")));
            };
            let end = start
                .checked_add(size)
                .filter(|&e| e <= start_of_footer)
                .ok_or_else(|| bad(format!("row group {g}: its bytes overrun the file")))?;
            lo = lo.min(start);
            hi = hi.max(end);
        }
        let rows = u64::try_from(group.num_rows())
            .map_err(|_| bad(format!("row group {g}: a negative row count")))?;
        if lo > hi {
            (lo, hi) = (0, 0);
        }
        groups.push((rows, lo..hi));
    }
    Ok(Footer {
        schema: meta.schema().clone(),
        object,
        tail_at,
        tail,
        label,
        groups,
    })
}
