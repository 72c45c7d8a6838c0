//! One object read by byte ranges, pinned to the version it was listed or
//! HEADed at: what a reader of files that are not Zrecord stores (a
//! dataset's parquet files, opened where they live) fetches through.

use std::ops::Range;

#[allow(clippy::wildcard_imports)]
use super::*;

/// One object on object storage (`s3://`, `gs://`, `az://`, `http(s)://`),
/// its size and version taken once, when it was listed or opened; every
/// later read asks for that version (`If-Match` on its ETag, or its
/// version id), so an object replaced since is an
/// [`ErrorKind::Remote`] ("changed since it was opened"), never bytes of
/// another version.
///
/// ```no_run
/// use loaderx_core::{RemoteObject, RemoteOptions};
/// let file = RemoteObject::open("s3://bucket/train/0000.parquet", &RemoteOptions::from_env())?;
/// let tail = file.read(file.len() - 8..file.len())?;
/// assert_eq!(&tail[4..], b"PAR1");
/// # Ok::<(), loaderx_core::Error>(())
/// ```
#[derive(Clone)]
pub struct RemoteObject {
    target: Arc<Target>,
    size: u64,
    e_tag: Option<String>,
    version: Option<String>,
    concurrency: usize,
}

impl std::fmt::Debug for RemoteObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteObject")
            .field("url", &self.target.url)
            .field("size", &self.size)
            .field("e_tag", &self.e_tag)
            .field("version", &self.version)
            .finish()
    }
}

/// Where the first wildcard of a URL pattern is: `*` or `?`, except in an
/// `http(s)://` URL, where `?` starts the query and only `*` is one.
fn wildcard_at(pattern: &str) -> Option<usize> {
    if pattern.starts_with("http://") || pattern.starts_with("https://") {
        pattern.find('*')
    } else {
        pattern.find(['*', '?'])
    }
}

/// Whether `name` matches `pattern`, where `*` is any run of characters
/// other than `/` and `?` one such character.
fn wildcard_match(pattern: &[u8], name: &[u8]) -> bool {
    // The classic two-pointer match with one backtrack point per `*`.
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, n));
                p += 1;
            }
            Some(&c) if (c == b'?' && name[n] != b'/') || c == name[n] => {
                p += 1;
                n += 1;
            }
            _ => match star {
                Some((sp, sn)) if name[sn] != b'/' => {
                    p = sp + 1;
                    n = sn + 1;
                    star = Some((sp, sn + 1));
                }
                _ => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

impl RemoteObject {
    /// The object at `url`, its size and version read by one HEAD.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] for a URL that names no object store;
    /// [`ErrorKind::Remote`] when the object cannot be reached or is absent.
    pub fn open(url: &str, options: &RemoteOptions) -> Result<RemoteObject, Error> {
        let t = target(url, options)?;
        let meta = block_on(t.store.head(&t.prefix))?.map_err(|e| t.err("", None, e))?;
        Ok(RemoteObject::of(Arc::new(t), &meta, options))
    }

    fn of(target: Arc<Target>, meta: &ObjectMeta, options: &RemoteOptions) -> RemoteObject {
        // A weak ETag cannot be matched byte for byte: the version pins it
        // where the service has one, else nothing does.
        let e_tag = meta.e_tag.clone().filter(|e| !e.starts_with("W/"));
        RemoteObject {
            target,
            size: meta.size,
            e_tag,
            version: meta.version.clone(),
            concurrency: options.concurrency.max(1),
        }
    }

    /// Every object that `pattern` names, in the order of their URLs: a
    /// URL whose last components may hold wildcards (`*`, `?`; a `*` never
    /// crosses a `/`), or a prefix ending in `/` (every object under it,
    /// at any depth). Listed with one client; each object's size and
    /// version are those of the listing.
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open); a pattern that names no object is
    /// [`ErrorKind::NotAStore`] naming it.
    pub fn list(pattern: &str, options: &RemoteOptions) -> Result<Vec<RemoteObject>, Error> {
        let shown = crate::redact_url(pattern);
        let wild = wildcard_at(pattern);
        if wild.is_none() && !pattern.ends_with('/') {
            return Ok(vec![RemoteObject::open(pattern, options)?]);
        }
        // The directory listed: everything before the first wildcard's
        // component.
        let cut = match wild {
            Some(w) => pattern[..w].rfind('/').map_or(0, |i| i + 1),
            None => pattern.len(),
        };
        let (dir, rest) = pattern.split_at(cut);
        let root = target(dir, options)?;
        let root_prefix = root.prefix.to_string();
        let listed: Vec<ObjectMeta> =
            block_on(root.store.list(Some(&root.prefix)).try_collect::<Vec<_>>())?
                .map_err(|e| root.err("", None, e))?;
        let base = dir.trim_end_matches('/');
        let mut found = Vec::new();
        for meta in listed {
            let full = meta.location.to_string();
            let rel = full
                .strip_prefix(&root_prefix)
                .unwrap_or(&full)
                .trim_start_matches('/');
            if !rest.is_empty() && !wildcard_match(rest.as_bytes(), rel.as_bytes()) {
                continue;
            }
            let t = Target {
                store: Arc::clone(&root.store),
                prefix: meta.location.clone(),
                url: crate::redact_url(&format!("{base}/{rel}")),
            };
            found.push(RemoteObject::of(Arc::new(t), &meta, options));
        }
        if found.is_empty() {
            return Err(ErrorKind::NotAStore {
                path: PathBuf::from(format!("{shown} (no object matches)")),
            }
            .into());
        }
        found.sort_by(|a, b| a.target.url.cmp(&b.target.url));
        Ok(found)
    }

    /// The object's URL, redacted (no user information or query).
    pub fn url(&self) -> &str {
        &self.target.url
    }

    /// Its size in bytes.
    pub fn len(&self) -> u64 {
        self.size
    }

    /// True for an empty object.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// The strong ETag it was opened at, if the service gave one.
    pub fn e_tag(&self) -> Option<&str> {
        self.e_tag.as_deref()
    }

    /// The version id it was opened at, if the service keeps versions.
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    fn options(&self, range: Range<u64>) -> GetOptions {
        GetOptions {
            if_match: self.e_tag.clone(),
            version: self.version.clone(),
            range: Some(range.into()),
            ..Default::default()
        }
    }

    fn changed(&self) -> Error {
        ErrorKind::Remote {
            path: PathBuf::from(&self.target.url),
            record: None,
            detail: "the object changed since it was opened (another ETag or version): \
                     its data is no longer the version pinned"
                .to_owned(),
        }
        .into()
    }

    async fn fetch(&self, range: Range<u64>) -> Result<Bytes, Error> {
        let t = &self.target;
        let want = range.end - range.start;
        let got = match t
            .store
            .get_opts(&t.prefix, self.options(range.clone()))
            .await
        {
            Ok(r) => r,
            Err(
                object_store::Error::Precondition { .. } | object_store::Error::NotFound { .. },
            ) => {
                return Err(self.changed());
            }
            Err(e) => return Err(t.err("", None, e)),
        };
        if got.meta.size != self.size
            || self.e_tag.is_some() && got.meta.e_tag.as_deref() != self.e_tag.as_deref()
        {
            return Err(self.changed());
        }
        let bytes = got.bytes().await.map_err(|e| t.err("", None, e))?;
        if bytes.len() as u64 != want {
            return Err(t.err(
                "",
                None,
                format!(
                    "bytes {}..{} returned {} bytes",
                    range.start,
                    range.end,
                    bytes.len()
                ),
            ));
        }
        Ok(bytes)
    }

    fn check(&self, range: &Range<u64>) -> Result<(), Error> {
        if range.start > range.end || range.end > self.size {
            return Err(Error::invalid(format!(
                "{}: bytes {}..{} are outside its {} bytes",
                self.target.url, range.start, range.end, self.size
            )));
        }
        Ok(())
    }

    /// The bytes of `range`, of the version it was opened at.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] for a range outside the object;
    /// [`ErrorKind::Remote`] when the read fails or the object changed.
    pub fn read(&self, range: Range<u64>) -> Result<Bytes, Error> {
        self.check(&range)?;
        if range.is_empty() {
            return Ok(Bytes::new());
        }
        block_on(self.fetch(range))?
    }

    /// The bytes of every range, in order, fetched concurrently (at most
    /// [`RemoteOptions::concurrency`] requests at a time).
    ///
    /// # Errors
    ///
    /// As [`read`](Self::read), for the first range that fails.
    pub fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>, Error> {
        for r in ranges {
            self.check(r)?;
        }
        block_on(async {
            futures::stream::iter(ranges.iter().cloned())
                .map(|r| async move {
                    if r.is_empty() {
                        Ok(Bytes::new())
                    } else {
                        self.fetch(r).await
                    }
                })
                .buffered(self.concurrency)
                .try_collect::<Vec<Bytes>>()
                .await
        })?
    }
}

#[cfg(test)]
mod object_tests {
    use super::wildcard_match;

    #[test]
    fn wildcards_match_within_a_component() {
        let m = |p: &str, n: &str| wildcard_match(p.as_bytes(), n.as_bytes());
        assert!(m("*.parquet", "train-0.parquet"));
        assert!(m("train-?.parquet", "train-0.parquet"));
        assert!(!m("*.parquet", "data/train-0.parquet"));
        assert!(m("*/*.parquet", "data/train-0.parquet"));
        assert!(m("data/train-*", "data/train-00001-of-00002.parquet"));
        assert!(!m("train-*.parquet", "test-0.parquet"));
        assert!(m("a*b*c", "aXXbYYc"));
        assert!(!m("a*b*c", "aXXbYY"));
    }
}
