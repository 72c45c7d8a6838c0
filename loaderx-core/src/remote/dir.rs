//! A directory of stores on object storage, as a multi-part dataset sees
//! it: sub-prefixes listed, a small object read and written conditionally,
//! and many stores opened at once over one client.

#[allow(clippy::wildcard_imports)]
use super::*;

/// What a conditional overwrite of a small object compares against: the
/// version [`RemoteDir::read_small`] saw.
#[derive(Debug, Clone)]
pub(crate) struct ObjectVersion(object_store::UpdateVersion);

/// A URL prefix holding stores (and, for a dataset, its manifest), with
/// one object-store client shared by everything under it.
pub(crate) struct RemoteDir {
    target: Target,
}

impl RemoteDir {
    /// The prefix at `url`.
    pub(crate) fn new(url: &str, o: &RemoteOptions) -> Result<RemoteDir, Error> {
        Ok(RemoteDir {
            target: target(url, o)?,
        })
    }

    /// The prefix of `target` (tests: an in-memory object store).
    #[cfg(test)]
    pub(super) fn of_target(target: Target) -> RemoteDir {
        RemoteDir { target }
    }

    /// The prefix's URL, redacted, without a trailing slash.
    pub(crate) fn url(&self) -> &str {
        &self.target.url
    }

    /// The target of `rel` (components joined by `/`) under the prefix,
    /// over the same client.
    fn child(&self, rel: &str) -> Target {
        let mut prefix = self.target.prefix.clone();
        for c in rel.split('/').filter(|c| !c.is_empty()) {
            prefix = prefix.join(c);
        }
        Target {
            store: Arc::clone(&self.target.store),
            prefix,
            url: format!("{}/{rel}", self.target.url),
        }
    }

    /// The object `name` under the prefix and its version, `None` when
    /// absent; an object larger than `max` bytes is
    /// [`ErrorKind::Corrupt`] and is not read.
    pub(crate) fn read_small(
        &self,
        name: &str,
        max: u64,
    ) -> Result<Option<(Vec<u8>, ObjectVersion)>, Error> {
        let t = &self.target;
        let obj = t.object(name);
        block_on(async {
            let head = match t.store.head(&obj).await {
                Ok(h) => h,
                Err(object_store::Error::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(t.err(name, None, e)),
            };
            if head.size > max {
                return Err(Error::corrupt(
                    t.url_of(name),
                    format!("{} bytes, more than the {max} read", head.size),
                ));
            }
            // The read is pinned to the version the head saw, so the bytes
            // and the version agree even while another writer replaces it.
            let options = object_store::GetOptions {
                if_match: head.e_tag.clone(),
                range: None,
                ..Default::default()
            };
            let got = match t.store.get_opts(&obj, options).await {
                Ok(r) => r,
                Err(
                    object_store::Error::NotFound { .. } | object_store::Error::Precondition { .. },
                ) => {
                    return Err(ErrorKind::Busy {
                        path: t.url_of(name),
                    }
                    .into());
                }
                Err(e) => return Err(t.err(name, None, e)),
            };
            let bytes = got.bytes().await.map_err(|e| t.err(name, None, e))?;
            if bytes.len() as u64 > max {
                return Err(Error::corrupt(
                    t.url_of(name),
                    format!("a read returned {} bytes, more than {max}", bytes.len()),
                ));
            }
            let version = ObjectVersion(object_store::UpdateVersion {
                e_tag: head.e_tag,
                version: head.version,
            });
            Ok(Some((bytes.to_vec(), version)))
        })?
    }

    /// Writes the object `name` under the prefix: created only if absent
    /// when `previous` is `None`, else replaced only if still at
    /// `previous`. A write that loses a race to another writer is
    /// [`ErrorKind::Busy`] and changes nothing. Where the service has no
    /// conditional write (plain HTTP, S3 with `conditional_put` disabled),
    /// the check is a read just before, which is not atomic, and replacing
    /// an object the service gives no ETag or version is refused.
    pub(crate) fn write_small(
        &self,
        name: &str,
        body: Vec<u8>,
        previous: Option<&ObjectVersion>,
    ) -> Result<(), Error> {
        let t = &self.target;
        let obj = t.object(name);
        let busy = || -> Error {
            ErrorKind::Busy {
                path: t.url_of(name),
            }
            .into()
        };
        let payload = PutPayload::from(body);
        let mode = match previous {
            None => PutMode::Create,
            Some(v) => PutMode::Update(v.0.clone()),
        };
        match block_on(t.store.put_opts(
            &obj,
            payload.clone(),
            object_store::PutOptions::from(mode),
        ))? {
            Ok(_) => Ok(()),
            Err(
                object_store::Error::AlreadyExists { .. }
                | object_store::Error::Precondition { .. },
            ) => Err(busy()),
            Err(object_store::Error::NotImplemented { .. }) => {
                // No conditional write: a check just before the write, which
                // needs a validator to compare (not atomic: two writers
                // racing between the check and the write both succeed).
                if previous.is_some_and(|p| p.0.e_tag.is_none() && p.0.version.is_none()) {
                    return Err(t.err(
                        name,
                        None,
                        "the service has no conditional write and reports no ETag or version: \
                         the object cannot be replaced safely",
                    ));
                }
                let now = self.read_small(name, u64::MAX)?.map(|(_, v)| v.0);
                let same = match (previous, &now) {
                    (None, None) => true,
                    (Some(p), Some(n)) => p.0.e_tag == n.e_tag && p.0.version == n.version,
                    _ => false,
                };
                if !same {
                    return Err(busy());
                }
                block_on(t.store.put(&obj, payload))?.map_err(|e| t.err(name, None, e))?;
                Ok(())
            }
            Err(e) => Err(t.err(name, None, e)),
        }
    }

    /// The names of the sub-prefixes directly under `rel` (`""`: the
    /// prefix itself), in name order.
    pub(crate) fn subdirs(&self, rel: &str) -> Result<Vec<String>, Error> {
        let t = self.child(rel);
        let listed = block_on(t.store.list_with_delimiter(Some(&t.prefix)))?
            .map_err(|e| t.err("", None, e))?;
        let mut names: Vec<String> = listed
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename().map(str::to_owned))
            .collect();
        names.sort();
        Ok(names)
    }

    /// Opens the stores at `rels` (each relative to the prefix) with
    /// `o`, up to `o.concurrency` at once, over this prefix's client; in
    /// `rels`' order, or the first error in that order.
    pub(crate) fn open_stores(
        &self,
        rels: &[String],
        o: &RemoteOptions,
    ) -> Result<Vec<StoreReader>, Error> {
        par_map(rels, o.concurrency, |rel| open_target(self.child(rel), o))
    }

    /// [`subdirs`](Self::subdirs) of each of `rels`, up to `concurrency`
    /// listings at once.
    pub(crate) fn subdirs_of(
        &self,
        rels: &[String],
        concurrency: usize,
    ) -> Result<Vec<Vec<String>>, Error> {
        par_map(rels, concurrency, |rel| self.subdirs(rel))
    }
}

/// `f` of every item, on up to `workers` threads (each request blocks its
/// thread; the runtime runs them concurrently), in `items`' order; the
/// first error in that order when any fails (the others then stop at
/// their next item).
fn par_map<T: Sync, R: Send>(
    items: &[T],
    workers: usize,
    f: impl Fn(&T) -> Result<R, Error> + Sync,
) -> Result<Vec<R>, Error> {
    let next = AtomicU64::new(0);
    let workers = workers.clamp(1, 64).min(items.len().max(1));
    let mut done: Vec<(usize, Result<R, Error>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                        let Some(item) = items.get(i) else { break };
                        let r = f(item);
                        let failed = r.is_err();
                        mine.push((i, r));
                        if failed {
                            next.store(items.len() as u64, Ordering::Relaxed);
                            break;
                        }
                    }
                    mine
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| {
                h.join()
                    .unwrap_or_else(|_| vec![(0, Err(Error::invalid("a remote worker panicked")))])
            })
            .collect()
    });
    // Without an error every item was done; with one, the first (in
    // `items`' order) among those that failed is the answer.
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}
