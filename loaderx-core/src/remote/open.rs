//! Opening a store by URL: its metadata fetched and checked as a local
//! store's, and its identity for the block cache.

#[allow(clippy::wildcard_imports)]
use super::*;

/// The location table is read in ranged requests of this many bytes.
pub(super) const TABLE_CHUNK: u64 = 8 << 20;

/// Opens and validates the store at `url`.
pub(crate) fn open(url: &str, o: &RemoteOptions) -> Result<StoreReader, Error> {
    open_target(target(url, o)?, o)
}

/// Opens and validates the store that `t` addresses.
pub(super) fn open_target(t: Target, o: &RemoteOptions) -> Result<StoreReader, Error> {
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
        let raw = get_pinned(&t, META_FILE, &head, 0..STATIC_PAGE_LEN as u64).await?;
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
                let (t, meta_head) = (&t, &meta_head);
                async move {
                    let want = r.end - r.start;
                    let b = get_pinned(t, META_FILE, meta_head, r).await?;
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
    // The dictionary, read at the version its head saw, and `meta.zr`'s
    // validators once more: every head of this open came after the first
    // look at `meta.zr` and before this one, so a store replaced meanwhile
    // (a re-publication deletes and re-creates `meta.zr`) is refused here
    // rather than read as one store of two.
    let (dict, ()) = block_on(async {
        let dict = async {
            match &dict_head {
                None => Ok(None),
                Some(h) => get_pinned(&t, DICT_FILE, h, 0..h.size).await.map(Some),
            }
        };
        let again = async {
            let now = t
                .store
                .head(&meta_obj)
                .await
                .map_err(|e| read_error(&t, META_FILE, None, e))?;
            same_object(&t, META_FILE, None, &meta_head, &now)
        };
        futures::try_join!(dict, again)
    })??;
    let dict = match (dict, dict_len) {
        (Some(d), Some(len)) => {
            if d.len() as u64 != len {
                return Err(Error::corrupt(
                    path.join(DICT_FILE),
                    format!("dict.zr is {len} bytes but a read returned {}", d.len()),
                ));
            }
            Some(d.to_vec())
        }
        _ => None,
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
        shards.push(Shard::unmapped(tail));
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
    // Blocks in the directory outlive this open: serve them to a later open
    // only when the identity tells this store from one re-written at the
    // same URL. Without a store id, every object must carry a version or a
    // strong ETag (a weak one promises no byte identity; a last-modified
    // time has one-second resolution; nothing at all, as from a plain
    // HTTP server, hashes the same for two stores of one `meta.zr`).
    let proven = store_id.is_some()
        || std::iter::once(&meta_head)
            .chain(dict_head.as_ref())
            .chain(shard_heads.iter().flatten())
            .all(identifies);
    let this_open_only;
    let cache_options = if proven {
        o
    } else {
        this_open_only = o.clone().cache_dir(None);
        &this_open_only
    };
    let cache = BlockCache::new(cache_options, &identity)?;
    let remote = RemoteShards {
        inner: Arc::new(Inner {
            target: t,
            tails,
            validators: shard_heads
                .iter()
                .map(|h| h.as_ref().map(|h| (h.e_tag.clone(), h.version.clone())))
                .map(Option::unwrap_or_default)
                .collect(),
            cache,
            opts: o.clone(),
            stats: Counters::default(),
        }),
    };
    let table = Some(Region::Heap(bytes));
    Ok(
        StoreReader::assemble(&path, None, table, checked, shards, codec, dict)
            .with_source(Box::new(remote)),
    )
}

/// The options of a read pinned to the content of the object that `head`
/// describes: its version, and its ETag when that is strong (`If-Match`
/// compares strongly, so a weak ETag would fail every read; a response's
/// validators are compared by [`same_object`] in any case).
pub(super) fn pinned(e_tag: Option<&String>, version: Option<&String>) -> GetOptions {
    GetOptions {
        if_match: e_tag
            .filter(|e| !e.is_empty() && !e.starts_with("W/"))
            .cloned(),
        version: version.cloned(),
        ..GetOptions::default()
    }
}

/// The error of a read that found object `name` other than the store
/// was opened with.
pub(super) fn changed(t: &Target, name: &str, record: Option<u64>, what: &str) -> Error {
    t.err(
        name,
        record,
        format!(
            "re-written since the store was opened ({what}): the store changed while it was \
             being read; reopen it"
        ),
    )
}

/// The error of a pinned read of object `name`: a failed precondition or
/// a vanished object is the store changing under the read ([`changed`]).
pub(super) fn read_error(
    t: &Target,
    name: &str,
    record: Option<u64>,
    e: object_store::Error,
) -> Error {
    match e {
        object_store::Error::Precondition { .. } => {
            changed(t, name, record, "its ETag no longer matches")
        }
        object_store::Error::NotFound { .. } => changed(t, name, record, "it was deleted"),
        e => t.err(name, record, e),
    }
}

/// Fails ([`changed`]) when `now`, the validators of a response for
/// object `name`, differ from `was`, those `open` saw: its ETag, version,
/// size or last-modified time (one a response lacks is not compared).
pub(super) fn same_object(
    t: &Target,
    name: &str,
    record: Option<u64>,
    was: &ObjectMeta,
    now: &ObjectMeta,
) -> Result<(), Error> {
    let time = |m: &ObjectMeta| Some(m.last_modified.to_rfc3339());
    for (what, was, now) in [
        ("ETag", was.e_tag.clone(), now.e_tag.clone()),
        ("version", was.version.clone(), now.version.clone()),
        (
            "size",
            Some(was.size.to_string()),
            Some(now.size.to_string()),
        ),
        ("last modified", time(was), time(now)),
    ] {
        if let (Some(was), Some(now)) = (was, now)
            && was != now
        {
            return Err(changed(
                t,
                name,
                record,
                &format!("{what} {now}, was {was}"),
            ));
        }
    }
    Ok(())
}

/// The bytes `range` of object `name`, read at the content `head`
/// describes ([`pinned`], [`same_object`]). An empty range (of an empty
/// object) is read without a request, which would be invalid.
pub(super) async fn get_pinned(
    t: &Target,
    name: &str,
    head: &ObjectMeta,
    range: std::ops::Range<u64>,
) -> Result<Bytes, Error> {
    if range.is_empty() {
        return Ok(Bytes::new());
    }
    let options = GetOptions {
        range: Some(range.into()),
        ..pinned(head.e_tag.as_ref(), head.version.as_ref())
    };
    let got = t
        .store
        .get_opts(&t.object(name), options)
        .await
        .map_err(|e| read_error(t, name, None, e))?;
    same_object(t, name, None, head, &got.meta)?;
    got.bytes().await.map_err(|e| read_error(t, name, None, e))
}

/// True when `m` names one content of its object: a version id, or an ETag
/// that is not weak (`W/"…"`).
pub(super) fn identifies(m: &ObjectMeta) -> bool {
    m.version.is_some()
        || m.e_tag
            .as_deref()
            .is_some_and(|e| !e.is_empty() && !e.starts_with("W/"))
}

/// Hashes an object's validators (size, ETag, last modified, version; a
/// missing object hashes as such) into a cache identity.
pub(super) fn validators(h: &mut Sha256, m: Option<&ObjectMeta>) {
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
pub(super) async fn read_store_id(t: &Target) -> Result<Option<Vec<u8>>, Error> {
    match t.store.get(&t.object(STORE_ID_FILE)).await {
        Ok(r) if r.meta.size <= 256 => {
            let b = r.bytes().await.map_err(|e| t.err(STORE_ID_FILE, None, e))?;
            Ok(Some(b.to_vec()))
        }
        Ok(_) | Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(t.err(STORE_ID_FILE, None, e)),
    }
}
