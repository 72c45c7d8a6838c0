//! Opening a published store and gathering its records.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use rayon::prelude::*;

use crate::codec::{Codec, CodecState, Decoder, MAX_DICT_LEN, Sink};
use crate::engine::blocks::{Copied, Resident};
use crate::engine::cold::{ColdState, file_id};
use crate::engine::files;
use crate::engine::layout::{Layout, Uniform};
use crate::engine::source::{ShardSource, StagedBytes};
use crate::error::{Error, ErrorKind};
use crate::format::{
    self, DICT_FILE, MAX_DATA_SHARDS, MAX_SCHEMA_LEN, META_FILE, RECORD_LOC_LEN, RecordLoc,
    STATIC_PAGE_LEN, Schema, StaticPage,
};
use crate::{Generation, MAX_RECORD_LEN};

/// How many records ahead a raw copy loop prefetches (its record's cache
/// line; for a block table beyond [`BIG_TABLE_BYTES`], its entry twice as
/// far ahead). Measured on workloads of 1 to 64-byte records
/// (`benches/layouts.rs`): a data prefetch pays from 2-byte records up.
const AHEAD: usize = 32;
/// A block table larger than this (about an L2 cache) is prefetched too.
const BIG_TABLE_BYTES: usize = 256 << 10;

/// Gathers smaller than this many bytes run on the calling thread.
pub(super) const PARALLEL_MIN_BYTES: usize = 256 << 10;
/// Raw gathers of fewer records than this run on the calling thread: a
/// record of up to 64 bytes copies in a few nanoseconds, so below this many
/// the copies take well under the tens of microseconds a hand-off to the
/// pool and back costs on this crate's 2-core test machine. A judgement
/// from those two orders of magnitude, not a tuned value: the small-record
/// benchmark's batches of 1024 stay on the calling thread either way.
pub(super) const PARALLEL_MIN_RECORDS: usize = 16 << 10;
/// No zstd frame decodes to more than this many times its size: a block
/// decodes to at most 128 KiB and takes at least 4 bytes (an RLE block).
const ZSTD_MAX_EXPANSION: u64 = 32 << 10;

/// A published store opened read-only: a local one holding a shared lock,
/// or one on object storage (feature `remote`).
pub(crate) struct StoreReader {
    path: PathBuf,
    /// The open `meta.zr` of a local store, holding its shared lock.
    _meta: Option<File>,
    /// The static page and location table: mapped for a local store, read
    /// into memory for a remote one.
    table: Option<Region>,
    /// How records are found: computed from runs, or read from `table`.
    layout: Layout,
    shards: Vec<Shard>,
    /// `shards.len() - 1` when the shard count is a power of two (the
    /// default 4 is), so a record's shard is a mask instead of a division.
    shard_mask: Option<u64>,
    length: u64,
    schema: Schema,
    /// The format generation the schema shows (for a JSON Ragged store,
    /// refined from its records by [`crate::DynRagged`]).
    generation: Generation,
    codec: CodecState,
    dict: Option<Vec<u8>>,
    /// Where the payload shards come from when they are not mapped (a
    /// store on object storage).
    source: Option<Box<dyn ShardSource>>,
    /// The read mode and the direct reads of a local store ([`super::cold`]).
    pub(super) cold: ColdState,
}

/// Bytes of `meta.zr` up to the end of its location table.
pub(crate) enum Region {
    /// A local store's mapped file.
    Map(Mmap),
    /// A remote store's fetched bytes.
    #[cfg_attr(not(feature = "remote"), allow(dead_code))]
    Heap(Vec<u8>),
}

impl std::ops::Deref for Region {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Region::Map(m) => m,
            Region::Heap(v) => v,
        }
    }
}

/// The stored bytes of the records of one gather, ready to decode: a local
/// store's mapped shards hold them already; a remote store's were fetched
/// (coalesced, through the block cache) by [`StoreReader::stage`].
pub(crate) enum Staged {
    /// Read from the mapped shards.
    Local,
    /// Made available by the store's [`ShardSource`].
    Fetched(Box<dyn StagedBytes>),
}

pub(crate) struct Shard {
    map: Option<Mmap>,
    pub(crate) tail: u64,
    /// `(device, inode)` of a local shard's file, which direct reads
    /// reopen ([`super::cold`]).
    id: Option<(u64, u64)>,
}

impl Shard {
    fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
}

fn file_len(file: &File, path: &Path) -> Result<u64, Error> {
    file.metadata()
        .map(|m| m.len())
        .map_err(|e| Error::io(path, e))
}

/// What [`check_page`] validated of a static page.
pub(crate) struct CheckedPage {
    pub(crate) page: StaticPage,
    pub(crate) codec: Codec,
    /// Where the location table ends in `meta.zr` (within its length).
    pub(crate) table_end: u64,
    pub(crate) shard_count: usize,
    pub(crate) schema: Schema,
    pub(crate) generation: Generation,
}

/// Refuses a destination of `dst_len` elements for `records` records of
/// `width` bytes (a fixed-width gather's).
pub(crate) fn check_fixed_dst(records: usize, width: usize, dst_len: usize) -> Result<(), Error> {
    if records.checked_mul(width) != Some(dst_len) {
        return Err(ErrorKind::Buffer {
            detail: format!(
                "{records} records of {width} bytes need {} bytes, got {dst_len}",
                records.saturating_mul(width),
            ),
        }
        .into());
    }
    Ok(())
}

/// A new vector of `records * width` bytes that `fill` writes whole (into
/// its fresh memory, never zeroed first: for small records the zeroing
/// costs as much as the copy), or `fill`'s error.
pub(crate) fn gather_vec(
    records: usize,
    width: usize,
    fill: impl FnOnce(&mut [std::mem::MaybeUninit<u8>]) -> Result<(), Error>,
) -> Result<Vec<u8>, Error> {
    let total = records
        .checked_mul(width)
        .ok_or_else(|| ErrorKind::Buffer {
            detail: format!("{records} records of {width} bytes overflow memory"),
        })?;
    let mut out = Vec::new();
    out.try_reserve_exact(total)
        .map_err(|_| ErrorKind::Buffer {
            detail: format!("cannot allocate {total} bytes for the gather"),
        })?;
    fill(&mut out.spare_capacity_mut()[..total])?;
    // SAFETY: the capacity was reserved above and `fill` returned without
    // error, which (its contract, as `gather_fixed`'s) means it wrote all
    // `total` bytes; `u8` has no invalid values.
    unsafe { out.set_len(total) };
    Ok(out)
}

/// Refuses a `meta.zr` of `meta_len` bytes too short for its static page
/// (an empty one is a store whose writer never published it).
pub(crate) fn check_meta_len(path: &Path, meta_len: u64) -> Result<(), Error> {
    if meta_len >= STATIC_PAGE_LEN as u64 {
        return Ok(());
    }
    if meta_len == 0 {
        return Err(ErrorKind::NotPublished {
            path: path.to_path_buf(),
        }
        .into());
    }
    Err(Error::corrupt(
        path.join(META_FILE),
        format!("meta.zr is {meta_len} bytes, shorter than its 4096-byte static page"),
    ))
}

/// Validates the static page `raw` of a `meta.zr` of `meta_len` bytes.
pub(crate) fn check_page(
    path: &Path,
    meta_len: u64,
    raw: &[u8; STATIC_PAGE_LEN],
) -> Result<CheckedPage, Error> {
    let meta_path = path.join(META_FILE);
    let page = StaticPage::decode(raw);
    let h = page.header;
    if h.is_unpublished() {
        return Err(ErrorKind::NotPublished {
            path: path.to_path_buf(),
        }
        .into());
    }
    let bad = |detail: String| Error::corrupt(&meta_path, detail);
    if h.schema_length == 0 || usize::from(h.schema_length) > MAX_SCHEMA_LEN {
        return Err(bad(format!(
            "schema length {} outside 1..=2040",
            h.schema_length
        )));
    }
    if h.data_shards == 0 {
        return Err(bad("data_shards is 0".into()));
    }
    let Some(codec) = Codec::from_tag(h.codec) else {
        return Err(bad(format!("unknown codec tag {}", h.codec)));
    };
    if h.reserved != [0; 4] {
        return Err(bad("reserved header bytes are not zero".into()));
    }
    let table_end = format::record_loc_offset(h.length)
        .filter(|&end| end <= meta_len)
        .ok_or_else(|| {
            bad(format!(
                "header claims {} records but meta.zr holds a table for {}",
                h.length,
                (meta_len - STATIC_PAGE_LEN as u64) / RECORD_LOC_LEN as u64
            ))
        })?;
    let shard_count = usize::from(h.data_shards);
    if let Some(s) = (shard_count..MAX_DATA_SHARDS).find(|&s| page.tails[s] != 0) {
        return Err(bad(format!("tail of unused shard {s} is not zero")));
    }
    let (schema, generation) = Schema::decode_generation(&page.schema, &meta_path)?;
    Ok(CheckedPage {
        page,
        codec,
        table_end,
        shard_count,
        schema,
        generation,
    })
}

/// Refuses a `dict.zr` of `len` bytes (`None`: absent) that a `codec`
/// store must not have, or that is over the size limit, before it is read.
pub(crate) fn check_dict_len(path: &Path, codec: Codec, len: Option<u64>) -> Result<(), Error> {
    match len {
        None => Ok(()),
        Some(_) if codec != Codec::ZstdDict => Err(Error::corrupt(
            path,
            format!("{codec} store has an unexpected dict.zr"),
        )),
        Some(len) if len > MAX_DICT_LEN as u64 => Err(Error::corrupt(
            path.join(DICT_FILE),
            format!("dict.zr is {len} bytes, more than the {MAX_DICT_LEN}-byte limit"),
        )),
        Some(_) => Ok(()),
    }
}

/// The codec state of a `codec` store with the dictionary `dict`.
pub(crate) fn codec_state(
    path: &Path,
    codec: Codec,
    dict: Option<&[u8]>,
) -> Result<CodecState, Error> {
    match (codec, dict) {
        (Codec::ZstdDict, None) => Err(Error::corrupt(path, "zstd_dict store has no dict.zr")),
        (Codec::ZstdDict, Some([])) => {
            Err(Error::corrupt(path.join(DICT_FILE), "dict.zr is empty"))
        }
        // A raw or zstd store with a dict.zr was refused by `check_dict_len`.
        _ => CodecState::new(codec, dict, false).map_err(|e| Error::corrupt(path, e)),
    }
}

/// Refuses a payload shard `p` of `len` bytes shorter than its committed `tail`.
pub(crate) fn check_shard_len(p: &Path, len: u64, tail: u64) -> Result<(), Error> {
    if len < tail {
        return Err(Error::corrupt(
            p,
            format!("payload shard is {len} bytes but its committed tail is {tail}"),
        ));
    }
    Ok(())
}

impl Shard {
    /// A shard read through a [`ShardSource`], never mapped.
    #[cfg_attr(not(feature = "remote"), allow(dead_code))]
    pub(crate) fn unmapped(tail: u64) -> Shard {
        Shard {
            map: None,
            tail,
            id: None,
        }
    }
}

impl StoreReader {
    /// Opens and validates the local store at `path` (a URL is the
    /// opener's: [`crate::store::open_reader`]).
    pub(crate) fn open(path: &Path) -> Result<StoreReader, Error> {
        let meta_path = path.join(META_FILE);
        let Some((meta, _)) = files::open_regular(&meta_path)? else {
            return Err(ErrorKind::NotAStore {
                path: path.to_path_buf(),
            }
            .into());
        };
        files::lock(&meta, path, false)?;
        // The length under the lock: a writer may have been growing it.
        let meta_len = file_len(&meta, &meta_path)?;
        check_meta_len(path, meta_len)?;
        let mut raw = [0u8; STATIC_PAGE_LEN];
        meta.read_exact_at(&mut raw, 0)
            .map_err(|e| Error::io(&meta_path, e))?;
        let checked = check_page(path, meta_len, &raw)?;

        let dict_path = path.join(DICT_FILE);
        let dict_file = files::open_regular(&dict_path)?;
        check_dict_len(path, checked.codec, dict_file.as_ref().map(|d| d.1))?;
        let dict = match dict_file {
            None => None,
            Some((f, len)) => {
                // The length was bounded above; read no more than it, and
                // notice a file that changed size underneath.
                let mut d = vec![0u8; len as usize];
                f.read_exact_at(&mut d, 0)
                    .map_err(|e| Error::io(&dict_path, e))?;
                Some(d)
            }
        };
        let codec = codec_state(path, checked.codec, dict.as_deref())?;

        let mut shards = Vec::with_capacity(checked.shard_count);
        for s in 0..checked.shard_count {
            let p = path.join(format::data_file(s));
            let tail = checked.page.tails[s];
            let Some((f, len)) = files::open_regular(&p)? else {
                return Err(Error::corrupt(&p, "payload shard is missing"));
            };
            check_shard_len(&p, len, tail)?;
            shards.push(Shard {
                map: files::map(&f, tail, &p)?,
                tail,
                id: file_id(&f),
            });
        }
        let table = files::map(&meta, checked.table_end, &meta_path)?.map(Region::Map);
        Ok(StoreReader::assemble(
            path,
            Some(meta),
            table,
            checked,
            shards,
            codec,
            dict,
        ))
    }

    /// Puts a validated store together.
    pub(crate) fn assemble(
        path: &Path,
        meta: Option<File>,
        table: Option<Region>,
        checked: CheckedPage,
        shards: Vec<Shard>,
        codec: CodecState,
        dict: Option<Vec<u8>>,
    ) -> StoreReader {
        let shard_count = shards.len();
        let cold = ColdState::new(shards.iter().map(|s| s.id).collect());
        let regions: Vec<&[u8]> = shards.iter().map(Shard::bytes).collect();
        let layout = Layout::detect(
            table
                .as_deref()
                .and_then(|t| t.get(STATIC_PAGE_LEN..))
                .unwrap_or(&[]),
            &checked.page.tails[..shard_count],
            checked.page.header.length,
            &regions,
        );
        StoreReader {
            path: path.to_path_buf(),
            _meta: meta,
            table,
            layout,
            shard_mask: shard_count
                .is_power_of_two()
                .then(|| shard_count as u64 - 1),
            shards,
            length: checked.page.header.length,
            schema: checked.schema,
            generation: checked.generation,
            codec,
            dict,
            source: None,
            cold,
        }
    }

    /// For a local raw store in the writer's regular layout (record `i`
    /// in shard `i & (shards - 1)` at `(i >> shift) * width` from the
    /// shard's base): `(shift, width, every shard's bytes from its base)`.
    /// What a gather over many parts copies from without touching the
    /// parts' readers.
    pub(super) fn raw_regular(&self) -> Option<(u32, usize, Vec<&[u8]>)> {
        if self.codec() != Codec::Raw || self.is_remote() {
            return None;
        }
        let u = self.layout.uniform().filter(|u| u.phys == u.logic)?;
        let (shift, base) = u.regular_pow2()?;
        let regions = self.placed_regions();
        if base.len() != regions.len() || base.is_empty() {
            return None;
        }
        let shards = regions
            .into_iter()
            .zip(base)
            .map(|(r, &b)| usize::try_from(b).ok().and_then(|b| r.get(b..)))
            .collect::<Option<Vec<_>>>()?;
        Some((shift, u.phys as usize, shards))
    }

    /// Closes `meta.zr`, dropping the shared lock held on it; the mapped
    /// table and shards stay readable. For stores known published, which
    /// loaderx never writes again.
    pub(crate) fn release_lock(&mut self) {
        self._meta = None;
        self.cold.close_files();
    }

    /// True while the store holds its shared lock (an open `meta.zr`): a
    /// store that released it (a part of a large dataset) keeps no
    /// descriptor open, and its direct reads open their shards per gather.
    pub(super) fn holds_lock(&self) -> bool {
        self._meta.is_some()
    }

    /// Attaches the source of the payload shards of a store that is not
    /// mapped (its shards made by [`Shard::unmapped`]).
    #[cfg_attr(not(feature = "remote"), allow(dead_code))]
    pub(crate) fn with_source(mut self, source: Box<dyn ShardSource>) -> StoreReader {
        self.source = Some(source);
        self
    }

    /// The source of a store that is not mapped.
    pub(crate) fn source(&self) -> Option<&dyn ShardSource> {
        self.source.as_deref()
    }

    /// True for a store read through a [`ShardSource`] (on object storage).
    pub(crate) fn is_remote(&self) -> bool {
        self.source.is_some()
    }

    /// The mapped bytes of shard `s` (empty for a remote store's).
    pub(super) fn shard_bytes(&self, s: usize) -> &[u8] {
        self.shards.get(s).map_or(&[], Shard::bytes)
    }

    /// The map of shard `s`, if it is mapped.
    pub(super) fn shard_map(&self, s: usize) -> Option<&Mmap> {
        self.shards.get(s).and_then(|s| s.map.as_ref())
    }

    /// The number of the shard of record `index`.
    #[inline(always)]
    pub(super) fn shard_index(&self, index: u64) -> usize {
        (match self.shard_mask {
            Some(mask) => index & mask,
            None => index % self.shards.len() as u64,
        }) as usize
    }

    /// Makes the stored bytes of the `(index, location)` records available
    /// to [`Self::stored`]: nothing to do for a local store; a remote store
    /// fetches them (coalesced, through its block cache).
    pub(super) fn stage(&self, records: &[(u64, RecordLoc)]) -> Result<Staged, Error> {
        let Some(source) = &self.source else {
            return Ok(Staged::Local);
        };
        // The loader's recorder: object-storage time (or its block cache's).
        let _fetch = crate::loader::lap::enter(crate::loader::Stage::Fetch);
        let wanted = records
            .iter()
            .map(|&(index, loc)| (index, self.shard_index(index), loc.offset, loc.phys_length));
        source.fetch(wanted.collect()).map(Staged::Fetched)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn len(&self) -> u64 {
        self.length
    }

    pub(crate) fn schema(&self) -> &Schema {
        &self.schema
    }

    pub(crate) fn generation(&self) -> Generation {
        self.generation
    }

    /// Records the generation the records show (a JSON Ragged store's dims).
    pub(crate) fn set_generation(&mut self, generation: Generation) {
        self.generation = generation;
    }

    pub(crate) fn codec(&self) -> Codec {
        self.codec.codec()
    }

    pub(crate) fn data_shards(&self) -> usize {
        self.shards.len()
    }

    /// The committed tail of every payload shard.
    #[cfg_attr(not(feature = "remote"), allow(dead_code))]
    pub(crate) fn tails(&self) -> Vec<u64> {
        self.shards.iter().map(|s| s.tail).collect()
    }

    pub(crate) fn dict(&self) -> Option<&[u8]> {
        self.dict.as_deref()
    }

    /// A local store's stored bytes as they are on disk: every payload
    /// shard up to its committed tail, and the location table; `None` for a
    /// remote store.
    pub(crate) fn stored_parts(&self) -> Option<(Vec<&[u8]>, &[u8])> {
        if self.is_remote() {
            return None;
        }
        let table = self.table.as_deref()?;
        let end = format::record_loc_offset(self.length)?;
        let table = table.get(STATIC_PAGE_LEN..usize::try_from(end).ok()?)?;
        let shards = self
            .shards
            .iter()
            .map(|s| s.bytes().get(..usize::try_from(s.tail).ok()?))
            .collect::<Option<Vec<_>>>()?;
        Some((shards, table))
    }

    /// SHA-256 of `meta.zr` up to the end of the location table (the
    /// static page: header, shard tails, schema; then every record's
    /// location) and of `dict.zr`: the same bytes locally and once pushed.
    pub(crate) fn table_digest(&self) -> [u8; 32] {
        use sha2::Digest as _;
        let mut h = sha2::Sha256::new();
        h.update(self.table.as_deref().unwrap_or(&[]));
        h.update(self.dict.as_deref().unwrap_or(&[]));
        h.finalize().into()
    }

    /// Bytes of the payload shards: the records as stored (compressed or
    /// not), without `meta.zr` or the dictionary.
    pub(crate) fn payload_bytes(&self) -> u64 {
        self.shards.iter().map(|s| s.tail).sum()
    }

    /// Bytes the store occupies: payload, `meta.zr` (header and location
    /// table) and dictionary.
    pub(crate) fn stored_bytes(&self) -> u64 {
        let payload = self.payload_bytes();
        let meta = STATIC_PAGE_LEN as u64 + self.length * RECORD_LOC_LEN as u64;
        payload + meta + self.dict.as_ref().map_or(0, |d| d.len() as u64)
    }

    /// Checks that every index is in range.
    pub(crate) fn check_indices(&self, indices: &[u64]) -> Result<(), Error> {
        match indices.iter().find(|&&i| i >= self.length) {
            Some(&index) => Err(ErrorKind::IndexOutOfRange {
                path: self.path.clone(),
                index,
                len: self.length,
            }
            .into()),
            None => Ok(()),
        }
    }

    /// The validated location of record `index` (which must be in range).
    pub(crate) fn loc(&self, index: u64) -> Result<RecordLoc, Error> {
        self.located(index).map(|(loc, _)| loc)
    }

    /// The bytes the uniform layout's `(shard, offset)` places point into:
    /// the layout's copy of the records in record order when it made one,
    /// else every shard's mapped bytes.
    fn placed_regions(&self) -> Vec<&[u8]> {
        match self.layout.uniform().and_then(Uniform::logical) {
            Some(copy) => vec![copy],
            None => self.shards.iter().map(Shard::bytes).collect(),
        }
    }

    /// True when the layout holds a copy of the records in memory (small
    /// records stored out of order): locations point into it, and nothing
    /// is read from the shards, cold or warm.
    pub(super) fn in_memory_copy(&self) -> bool {
        self.layout.uniform().and_then(Uniform::logical).is_some()
    }

    /// The bytes a validated location of record `index` points into.
    fn region_of(&self, index: u64) -> &[u8] {
        match self.layout.uniform().and_then(Uniform::logical) {
            Some(copy) => copy,
            None => self.shard_of(index).bytes(),
        }
    }

    /// The payload shard holding record `index`.
    fn shard_of(&self, index: u64) -> &Shard {
        &self.shards[self.shard_index(index)]
    }

    /// The validated location of record `index` and the bytes it points
    /// into.
    fn located(&self, index: u64) -> Result<(RecordLoc, &[u8]), Error> {
        if index < self.length
            && let Some(u) = self.layout.uniform()
        {
            // Validated with the whole table at open.
            let (s, loc) = u.loc(index);
            if let Some(region) = u.logical().or_else(|| self.shards.get(s).map(Shard::bytes)) {
                return Ok((loc, region));
            }
        }
        let at = (index as usize)
            .checked_mul(RECORD_LOC_LEN)
            .and_then(|x| x.checked_add(STATIC_PAGE_LEN))
            .ok_or_else(|| Error::corrupt_record(&self.path, index, "index overflows"))?;
        let table = self.table.as_deref().unwrap_or(&[]);
        let Some(entry) = table.get(at..at + RECORD_LOC_LEN) else {
            return Err(Error::corrupt_record(
                &self.path,
                index,
                "location table too short",
            ));
        };
        let mut b = [0u8; RECORD_LOC_LEN];
        b.copy_from_slice(entry);
        let loc = RecordLoc::decode(&b);
        let shard = self.shard_of(index);
        let in_bounds = loc
            .offset
            .checked_add(u64::from(loc.phys_length))
            .is_some_and(|end| end <= shard.tail);
        if !in_bounds || loc.phys_length == 0 {
            return Err(Error::corrupt_record(
                &self.path,
                index,
                format!(
                    "location {}+{} outside its shard's {} committed bytes",
                    loc.offset, loc.phys_length, shard.tail
                ),
            ));
        }
        if loc.logic_length == 0 || u64::from(loc.logic_length) > MAX_RECORD_LEN {
            return Err(Error::corrupt_record(
                &self.path,
                index,
                format!(
                    "logical length {} outside 1 byte to 2 GiB",
                    loc.logic_length
                ),
            ));
        }
        Ok((loc, shard.bytes()))
    }

    /// A decoder for one worker.
    pub(crate) fn decoder(&self) -> io::Result<Decoder<'_>> {
        self.codec.decoder()
    }

    /// The store's codec and dictionary, for a decoder shared with other
    /// stores ([`crate::codec::SharedDecoders`]).
    pub(super) fn codec_state(&self) -> &CodecState {
        &self.codec
    }

    /// Decodes record `index`, located at `loc`, into `dst` (exactly its
    /// logical length); on `Ok`, every byte of `dst` was written.
    pub(crate) fn read_at<D: Sink>(
        &self,
        index: u64,
        loc: RecordLoc,
        dst: &mut [D],
        dec: &mut Decoder<'_>,
        staged: &Staged,
    ) -> Result<(), Error> {
        if loc.logic_length as usize != dst.len() {
            return Err(Error::corrupt_record(
                &self.path,
                index,
                format!(
                    "record is {} bytes, expected {}",
                    loc.logic_length,
                    dst.len()
                ),
            ));
        }
        dec.decode(self.stored(staged, index, loc)?, dst)
            .map_err(|e| Error::corrupt_record(&self.path, index, e))
    }

    /// The stored bytes of record `index` at `loc`, a location [`Self::loc`]
    /// validated, from `staged` (which [`Self::stage`] made for it).
    pub(super) fn stored<'a>(
        &'a self,
        staged: &'a Staged,
        index: u64,
        loc: RecordLoc,
    ) -> Result<&'a [u8], Error> {
        match staged {
            Staged::Local => {
                let start = loc.offset as usize;
                Ok(&self.region_of(index)[start..start + loc.phys_length as usize])
            }
            Staged::Fetched(f) => f
                .get(self.shard_index(index), loc.offset, loc.phys_length)
                .ok_or_else(|| {
                    Error::corrupt_record(&self.path, index, "stored bytes were not fetched")
                }),
        }
    }

    /// Checks that the stored bytes of record `index` at `loc` (validated by
    /// [`Self::loc`]) can decode to its logical length, for callers that size
    /// memory by that length before decoding: a raw record stores exactly its
    /// logical bytes; a zstd frame that declares its content size (loaderx's
    /// always do) must declare this one, and whatever it declares, no frame
    /// expands more than [`ZSTD_MAX_EXPANSION`] times its stored size. A
    /// corrupt location table or a forged frame header then cannot make a
    /// gather allocate more than the store's bytes could ever decode to.
    ///
    /// Without `staged` (a remote store's records before they are fetched)
    /// a zstd frame's declared size is not read, only the expansion bound.
    pub(super) fn check_logical_length(
        &self,
        index: u64,
        loc: RecordLoc,
        staged: Option<&Staged>,
    ) -> Result<(), Error> {
        let logic = u64::from(loc.logic_length);
        let phys = u64::from(loc.phys_length);
        let declared = match (self.codec.codec(), staged) {
            (Codec::Raw, _) => Some(phys),
            (Codec::Zstd | Codec::ZstdDict, None) => None,
            (Codec::Zstd | Codec::ZstdDict, Some(staged)) => {
                zstd::zstd_safe::get_frame_content_size(self.stored(staged, index, loc)?).map_err(
                    |_| {
                        Error::corrupt_record(
                            &self.path,
                            index,
                            "stored bytes are not a zstd frame",
                        )
                    },
                )?
            }
        };
        let detail = if declared.is_some_and(|n| n != logic) {
            format!(
                "logical length {logic} but the stored bytes hold {}",
                declared.unwrap_or_default()
            )
        } else if logic > phys.saturating_mul(ZSTD_MAX_EXPANSION) {
            format!("logical length {logic} cannot come from {phys} stored bytes")
        } else {
            return Ok(());
        };
        Err(Error::corrupt_record(&self.path, index, detail))
    }

    /// The gather size below which [`Self::read_jobs`] decodes on the
    /// calling thread. Decompression is CPU-bound: worth fanning out far
    /// sooner than a memcpy.
    pub(super) fn parallel_min_bytes(&self) -> usize {
        match self.codec() {
            Codec::Raw => PARALLEL_MIN_BYTES,
            Codec::Zstd | Codec::ZstdDict => PARALLEL_MIN_BYTES / 16,
        }
    }

    /// Whether [`Self::read_jobs`] decodes `jobs` records of `total` bytes
    /// on the calling thread.
    pub(super) fn reads_serially(&self, total: usize, jobs: usize) -> bool {
        total < self.parallel_min_bytes() || jobs < 2 || rayon::current_num_threads() < 2
    }

    /// The error for record `index` whose location lies outside its shard.
    fn outside_shard(&self, index: u64) -> Error {
        Error::corrupt_record(&self.path, index, "location outside its shard")
    }

    /// Decodes every `(index, destination)` job, in parallel when worth it;
    /// on `Ok`, every byte of every destination was written.
    pub(super) fn read_jobs<D: Sink>(
        &self,
        jobs: Vec<(u64, RecordLoc, &mut [D])>,
        staged: &Staged,
    ) -> Result<(), Error> {
        let total: usize = jobs.iter().map(|j| j.2.len()).sum();
        // The loader's recorder: a compressed gather is decompression (the
        // stored bytes read as it goes), its stored bytes what was read.
        let _decompress = (self.codec() != Codec::Raw).then(|| {
            crate::loader::lap::add_read(jobs.iter().map(|j| u64::from(j.1.phys_length)).sum());
            crate::loader::lap::enter(crate::loader::Stage::Decompress)
        });
        run_jobs(
            jobs,
            total,
            self.parallel_min_bytes(),
            || self.decoder(),
            |dec, (index, loc, dst)| {
                let dec = dec
                    .as_mut()
                    .map_err(|e| Error::io(&self.path, io::Error::new(e.kind(), e.to_string())))?;
                self.read_at(index, loc, dst, dec, staged)
            },
        )
    }

    /// Gathers fixed-width records into `dst` (`indices.len() * width`
    /// bytes). On `Ok` every byte of `dst` was written (one `width`-byte
    /// record per index, each copied or decoded whole), so `dst` may be
    /// uninitialised memory.
    pub(crate) fn gather_fixed<D: Sink>(
        &self,
        indices: &[u64],
        width: usize,
        dst: &mut [D],
    ) -> Result<(), Error> {
        check_fixed_dst(indices.len(), width, dst.len())?;
        self.check_indices(indices)?;
        if width == 0 {
            return Ok(());
        }
        let direct = self.reads_direct(indices);
        if self.codec() == Codec::Raw && !self.is_remote() && !direct {
            return self.copy_raw(indices, width, dst);
        }
        // Warm: straight out of the memory tier, as locally out of the map.
        if self.codec() == Codec::Raw && self.copy_raw_resident(indices, width, dst)? {
            return Ok(());
        }
        let mut jobs = Vec::with_capacity(indices.len());
        for (&i, d) in indices.iter().zip(dst.chunks_exact_mut(width)) {
            jobs.push((i, self.loc(i)?, d));
        }
        self.read_located(jobs, direct)
    }

    /// Gathers fixed-width records into scattered destinations: each job is
    /// a record index and its `width`-byte destination. What a gather over
    /// concatenated stores ([`super::parts`]) hands each part. On `Ok`
    /// every destination was written whole.
    pub(crate) fn gather_fixed_jobs<D: Sink>(
        &self,
        jobs: Vec<(u64, &mut [D])>,
        width: usize,
    ) -> Result<(), Error> {
        if let Some((index, d)) = jobs
            .iter()
            .find(|(i, d)| *i >= self.length || d.len() != width)
        {
            if *index >= self.length {
                return Err(ErrorKind::IndexOutOfRange {
                    path: self.path.clone(),
                    index: *index,
                    len: self.length,
                }
                .into());
            }
            return Err(ErrorKind::Buffer {
                detail: format!("a {}-byte destination for a {width}-byte record", d.len()),
            }
            .into());
        }
        let direct = !self.is_remote() && {
            let indices: Vec<u64> = jobs.iter().map(|j| j.0).collect();
            self.reads_direct(&indices)
        };
        if self.codec() == Codec::Raw && !self.is_remote() && !direct {
            let copy = |(i, d): (u64, &mut [D])| -> Result<(), Error> {
                D::put(d, self.raw_record(i, width)?);
                Ok(())
            };
            let total = jobs.len().saturating_mul(width);
            if total < PARALLEL_MIN_BYTES
                || jobs.len() < PARALLEL_MIN_RECORDS
                || rayon::current_num_threads() < 2
            {
                return jobs.into_iter().try_for_each(copy);
            }
            let per_job = jobs.len().div_ceil(2 * rayon::current_num_threads());
            return jobs
                .into_par_iter()
                .with_min_len(per_job)
                .try_for_each(copy);
        }
        let mut located = Vec::with_capacity(jobs.len());
        for (i, d) in jobs {
            located.push((i, self.loc(i)?, d));
        }
        self.read_located(located, direct)
    }

    /// Reads located `(index, location, destination)` jobs: with `direct`
    /// (a local store read cold), a raw store's straight into their
    /// destinations and a compressed one's stored bytes into a scratch to
    /// decode; else out of the maps, or what a remote store fetched.
    fn read_located<D: Sink>(
        &self,
        mut jobs: Vec<(u64, RecordLoc, &mut [D])>,
        direct: bool,
    ) -> Result<(), Error> {
        if direct && self.codec() == Codec::Raw {
            return self.read_raw_direct(&mut jobs);
        }
        let records: Vec<_> = jobs.iter().map(|j| (j.0, j.1)).collect();
        let staged = if direct {
            self.read_stored_direct(&records)?
        } else {
            self.stage(&records)?
        };
        self.read_jobs(jobs, &staged)
    }

    /// [`Self::copy_raw`] for a remote raw store of the uniform layout whose
    /// blocks are all in the memory tier: copies straight out of the cached
    /// blocks (a record straddling two piece by piece), on the calling
    /// thread or in parallel exactly as `copy_raw` decides. `Ok(false)`,
    /// with `dst` partly written, when the layout is not uniform, there is
    /// no memory tier or a block is missing: the general path then fetches
    /// and rewrites every record. The tier's shared lock is held only while
    /// copying, and dropped before that fallback (whose puts write-lock it).
    fn copy_raw_resident<D: Sink>(
        &self,
        indices: &[u64],
        width: usize,
        dst: &mut [D],
    ) -> Result<bool, Error> {
        let uniform = self
            .layout
            .uniform()
            .filter(|u| u.phys as usize == width && u.logic as usize == width);
        let (Some(r), Some(u)) = (&self.source, uniform) else {
            return Ok(false);
        };
        let threads = rayon::current_num_threads();
        let copied = if dst.len() < PARALLEL_MIN_BYTES
            || indices.len() < PARALLEL_MIN_RECORDS
            || threads < 2
        {
            let Some(view) = r.resident(None) else {
                return Ok(false);
            };
            self.copy_resident_serial(&view, u, indices, width, dst)
        } else {
            // Each task locks the tier for itself, at the gather's tick: no
            // lock is held here while this thread waits for (and may run)
            // other tasks of the pool.
            let Some(tick) = r.resident(None).map(|v| v.tick()) else {
                return Ok(false);
            };
            let per_job = indices.len().div_ceil(2 * threads).max(1);
            dst.par_chunks_mut(width * per_job)
                .zip(indices.par_chunks(per_job))
                .map(|(d, idx)| match r.resident(Some(tick)) {
                    Some(view) => self.copy_resident_serial(&view, u, idx, width, d),
                    None => Err(None),
                })
                .try_reduce(|| 0, |a, b| Ok(a + b))
        };
        match copied {
            Ok(hits) => {
                r.count_memory_hits(hits);
                Ok(true)
            }
            Err(None) => Ok(false),
            Err(Some(e)) => Err(e),
        }
    }

    /// The records `(index, location, destination)` of a remote raw store,
    /// copied straight out of the memory tier when every block they touch
    /// is there and [`Self::read_jobs`] would decode them on the calling
    /// thread: no fetched pieces, no block list, one lookup per record.
    /// `Ok(false)`, with destinations partly written, otherwise (another
    /// codec, a gather `read_jobs` runs in parallel, a block missing, or a
    /// record whose lengths disagree, which the general path then reports).
    pub(super) fn copy_jobs_resident<D: Sink>(
        &self,
        jobs: &mut [(u64, RecordLoc, &mut [D])],
    ) -> Result<bool, Error> {
        let Some(r) = &self.source else {
            return Ok(false);
        };
        let total: usize = jobs.iter().map(|j| j.2.len()).sum();
        // A gather `read_jobs` would run in parallel takes the general path.
        if self.codec() != Codec::Raw || !self.reads_serially(total, jobs.len()) {
            return Ok(false);
        }
        let Some(view) = r.resident(None) else {
            return Ok(false);
        };
        let mut hits = 0;
        for (index, loc, dst) in jobs.iter_mut() {
            // A raw record stores exactly its logical bytes, which fill
            // `dst` (checked as `read_at` and the raw decoder check them).
            if loc.logic_length as usize != dst.len() || loc.phys_length != loc.logic_length {
                return Ok(false);
            }
            let s = self.shard_index(*index);
            match view.copy(s, loc.offset, dst, &mut hits) {
                Copied::Done => {}
                Copied::Miss => return Ok(false),
                Copied::Outside => {
                    return Err(self.outside_shard(*index));
                }
            }
        }
        drop(view);
        r.count_memory_hits(hits);
        Ok(true)
    }

    /// [`Self::copy_raw_resident`] on the calling thread, specialised for
    /// the common small widths as [`Self::copy_raw_serial`] is. The blocks
    /// newly touched, or `Err(None)` on a miss.
    fn copy_resident_serial<D: Sink>(
        &self,
        view: &Resident<'_>,
        u: &Uniform,
        indices: &[u64],
        width: usize,
        dst: &mut [D],
    ) -> Result<u64, Option<Error>> {
        match width {
            1 => self.copy_resident::<D, 1>(view, u, indices, width, dst),
            2 => self.copy_resident::<D, 2>(view, u, indices, width, dst),
            4 => self.copy_resident::<D, 4>(view, u, indices, width, dst),
            8 => self.copy_resident::<D, 8>(view, u, indices, width, dst),
            16 => self.copy_resident::<D, 16>(view, u, indices, width, dst),
            _ => self.copy_resident::<D, 0>(view, u, indices, width, dst),
        }
    }

    /// Copies records of `N` bytes (`width` when `N` is 0) placed by `u` out
    /// of `view`: the writer's layout with its case analysis hoisted out of
    /// the loop, as in [`Self::copy_uniform`], any other through `u`.
    #[inline(always)]
    fn copy_resident<D: Sink, const N: usize>(
        &self,
        view: &Resident<'_>,
        u: &Uniform,
        indices: &[u64],
        width: usize,
        dst: &mut [D],
    ) -> Result<u64, Option<Error>> {
        let w = if N == 0 { width } else { N };
        match u.regular_pow2() {
            Some((shift, base)) if base.len() == self.shards.len() && !base.is_empty() => {
                let mask = (base.len() - 1) as u64;
                let step = w as u64;
                self.copy_placed(view, indices, w, dst, |i| {
                    let s = (i & mask) as usize;
                    // An offset past every block is a miss, never a read.
                    let offset = base.get(s).map_or(u64::MAX, |b| {
                        b.wrapping_add((i >> shift).wrapping_mul(step))
                    });
                    (s, offset)
                })
            }
            _ => self.copy_placed(view, indices, w, dst, |i| u.place(i)),
        }
    }

    /// The loop of [`Self::copy_resident`], `place` giving each record's
    /// shard and offset.
    #[inline(always)]
    fn copy_placed<D: Sink>(
        &self,
        view: &Resident<'_>,
        indices: &[u64],
        w: usize,
        dst: &mut [D],
        place: impl Fn(u64) -> (usize, u64),
    ) -> Result<u64, Option<Error>> {
        /// A record placed ahead of its copy: its bytes, within one
        /// block (their lines prefetched), or where they start, for
        /// [`Resident::copy`] (straddling blocks, missing, or outside).
        #[derive(Clone, Copy)]
        enum Slot<'v> {
            Found(&'v [u8]),
            Other(usize, u64),
        }
        let (ahead, lines) = prefetch_plan(w);
        let find = |i: u64, hits: &mut u64| {
            let (s, offset) = place(i);
            match view.find(s, offset, w, hits) {
                Some(src) => {
                    prefetch_lines(src, 0, lines);
                    Slot::Found(src)
                }
                None => Slot::Other(s, offset),
            }
        };
        let mut hits = 0;
        // As out of a local store's maps: each record is placed (its block
        // looked up once) `ahead` records before it is copied, its lines
        // prefetched then, so that they are on their way when copied.
        let mut ring = [Slot::Other(0, u64::MAX); AHEAD];
        for (slot, &a) in ring[..ahead].iter_mut().zip(indices) {
            *slot = find(a, &mut hits);
        }
        for (j, (&i, d)) in indices.iter().zip(dst.chunks_exact_mut(w)).enumerate() {
            let slot = match indices.get(j + ahead) {
                Some(&a) => std::mem::replace(&mut ring[j % ahead], find(a, &mut hits)),
                None => ring[j % ahead],
            };
            let (s, offset) = match slot {
                Slot::Found(src) => {
                    D::put(d, src);
                    continue;
                }
                Slot::Other(s, offset) => (s, offset),
            };
            match view.copy(s, offset, d, &mut hits) {
                Copied::Done => {}
                Copied::Miss => return Err(None),
                Copied::Outside => {
                    return Err(Some(self.outside_shard(i)));
                }
            }
        }
        Ok(hits)
    }

    /// Gathers fixed-width records into a new vector, written straight into
    /// its fresh memory (never zeroed first: for small records the zeroing
    /// costs as much as the copy).
    pub(crate) fn gather_fixed_vec(&self, indices: &[u64], width: usize) -> Result<Vec<u8>, Error> {
        self.check_indices(indices)?;
        gather_vec(indices.len(), width, |dst| {
            self.gather_fixed(indices, width, dst)
        })
    }

    /// Copies the raw records of `width` bytes at `indices` (checked in
    /// range) into `dst` (`indices.len() * width` elements): the whole gather
    /// of a raw store. On the calling thread below [`PARALLEL_MIN_BYTES`] or
    /// [`PARALLEL_MIN_RECORDS`], else in one chunk of records per task.
    fn copy_raw<D: Sink>(&self, indices: &[u64], width: usize, dst: &mut [D]) -> Result<(), Error> {
        // With the uniform layout the lengths were checked for every record
        // at open: here once for the whole batch.
        let uniform = self
            .layout
            .uniform()
            .filter(|u| u.phys as usize == width && u.logic as usize == width);
        let threads = rayon::current_num_threads();
        if dst.len() < PARALLEL_MIN_BYTES || indices.len() < PARALLEL_MIN_RECORDS || threads < 2 {
            return self.copy_raw_serial(uniform, indices, width, dst);
        }
        let per_job = indices.len().div_ceil(2 * threads).max(1);
        dst.par_chunks_mut(width * per_job)
            .zip(indices.par_chunks(per_job))
            .try_for_each(|(d, idx)| self.copy_raw_serial(uniform, idx, width, d))
    }

    /// [`Self::copy_raw`] on the calling thread, in a loop specialised for
    /// the common small widths (the copy of a record is one load and store).
    fn copy_raw_serial<D: Sink>(
        &self,
        uniform: Option<&Uniform>,
        indices: &[u64],
        width: usize,
        dst: &mut [D],
    ) -> Result<(), Error> {
        let Some(u) = uniform else {
            for (&i, d) in indices.iter().zip(dst.chunks_exact_mut(width)) {
                D::put(d, self.raw_record(i, width)?);
            }
            return Ok(());
        };
        match width {
            1 => self.copy_uniform::<D, 1>(u, indices, width, dst),
            2 => self.copy_uniform::<D, 2>(u, indices, width, dst),
            4 => self.copy_uniform::<D, 4>(u, indices, width, dst),
            8 => self.copy_uniform::<D, 8>(u, indices, width, dst),
            16 => self.copy_uniform::<D, 16>(u, indices, width, dst),
            _ => self.copy_uniform::<D, 0>(u, indices, width, dst),
        }
    }

    /// Copies records of `N` bytes (`width` when `N` is 0) placed by `u`.
    #[inline(always)]
    fn copy_uniform<D: Sink, const N: usize>(
        &self,
        u: &Uniform,
        indices: &[u64],
        width: usize,
        dst: &mut [D],
    ) -> Result<(), Error> {
        let w = if N == 0 { width } else { N };
        let maps = self.placed_regions();
        if let Some((shift, base)) = u.regular_pow2()
            && base.len() == maps.len()
            && !maps.is_empty()
        {
            // The writer's layout: each shard's records from its base, the
            // shard picked by a mask. No layout case per record.
            let shards: Vec<&[u8]> = maps
                .iter()
                .zip(base)
                .map(|(m, &b)| {
                    usize::try_from(b)
                        .ok()
                        .and_then(|b| m.get(b..))
                        .unwrap_or(&[])
                })
                .collect();
            let mask = (shards.len() - 1) as u64;
            let (ahead, lines) = prefetch_plan(w);
            for (j, (&i, d)) in indices.iter().zip(dst.chunks_exact_mut(w)).enumerate() {
                // The record `ahead` places on: its cache lines are on their
                // way by the time it is copied.
                if let Some(&a) = indices.get(j + ahead) {
                    let start = ((a >> shift) as usize).wrapping_mul(w);
                    prefetch_lines(shards[(a & mask) as usize], start, lines);
                }
                let start = ((i >> shift) as usize).wrapping_mul(w);
                // Checked (one predictable branch): nothing here can read
                // past a shard, whatever the index.
                match shards[(i & mask) as usize].get(start..start.wrapping_add(w)) {
                    Some(src) => D::put(d, src),
                    None => return Err(self.outside_shard(i)),
                }
            }
            return Ok(());
        }
        if let Some((shift, blocks)) = u.blocks_pow2()
            && maps.len() == 1 << shift
        {
            // Runs out of order: one lookup in the block table, the shard
            // and the record's place in its block by masks.
            let mask = (maps.len() - 1) as u64;
            let b = blocks.block_shift();
            let within = (1u64 << b) - 1;
            let first = blocks.first();
            let entry = |i: u64| (((i >> shift >> b) << shift) | (i & mask)) as usize;
            let place = |i: u64| {
                let k = i >> shift;
                let offset = first.get(entry(i)).map_or(u64::MAX, |f| {
                    f.wrapping_add((k & within).wrapping_mul(w as u64))
                });
                ((i & mask) as usize, offset as usize)
            };
            // A table beyond the L2 cache is prefetched too, further ahead.
            let far = first.len() * 8 > BIG_TABLE_BYTES;
            // Software pipeline: each record is placed AHEAD records before
            // it is copied (its bytes prefetched then), so the table is read
            // once a record and the copies find their lines in flight.
            let (ahead, lines) = prefetch_plan(w);
            let mut ring = [(0usize, usize::MAX); AHEAD];
            for (slot, &a) in ring[..ahead].iter_mut().zip(indices) {
                *slot = place(a);
                prefetch_lines(maps[slot.0], slot.1, lines);
            }
            for (j, (&i, d)) in indices.iter().zip(dst.chunks_exact_mut(w)).enumerate() {
                if far && let Some(&a) = indices.get(j + 2 * ahead) {
                    prefetch(first.as_ptr().wrapping_add(entry(a)).cast());
                }
                let (s, start) = match indices.get(j + ahead) {
                    Some(&a) => {
                        let next = place(a);
                        prefetch_lines(maps[next.0], next.1, lines);
                        std::mem::replace(&mut ring[j % ahead], next)
                    }
                    None => ring[j % ahead],
                };
                // Checked like the regular loop's: never past a shard.
                match maps[s].get(start..start.wrapping_add(w)) {
                    Some(src) => D::put(d, src),
                    None => return Err(self.outside_shard(i)),
                }
            }
            return Ok(());
        }
        for (&i, d) in indices.iter().zip(dst.chunks_exact_mut(w)) {
            let (s, offset) = u.place(i);
            let start = offset as usize;
            // Never out of bounds after the checks at open; checked anyway
            // (one predictable branch), so nothing here can read past a shard.
            match maps
                .get(s)
                .and_then(|map| map.get(start..start.wrapping_add(w)))
            {
                Some(src) => D::put(d, src),
                None => return Err(self.outside_shard(i)),
            }
        }
        Ok(())
    }

    /// The stored bytes of raw record `index`, which must be `width` bytes.
    pub(super) fn raw_record(&self, index: u64, width: usize) -> Result<&[u8], Error> {
        let (loc, region) = self.located(index)?;
        if loc.logic_length as usize != width || loc.phys_length != loc.logic_length {
            return Err(Error::corrupt_record(
                &self.path,
                index,
                format!(
                    "raw record stores {} bytes for {} logical, expected {width}",
                    loc.phys_length, loc.logic_length
                ),
            ));
        }
        let start = loc.offset as usize;
        Ok(&region[start..start + width])
    }

    /// The layout found at open.
    #[cfg(test)]
    pub(crate) fn layout(&self) -> &Layout {
        &self.layout
    }
}

/// Runs `read` over every job with a worker's state from `init`: on the
/// calling thread when the jobs' `total` bytes are under `min_bytes`, there
/// is one job or one thread, else in parallel, each task taking jobs of at
/// least a quarter of `min_bytes` (decoding a few bytes is not worth a
/// task). The first error stops the rest.
pub(super) fn run_jobs<J: Send, S>(
    jobs: Vec<J>,
    total: usize,
    min_bytes: usize,
    init: impl Fn() -> S + Sync + Send,
    read: impl Fn(&mut S, J) -> Result<(), Error> + Sync + Send,
) -> Result<(), Error> {
    let n = jobs.len();
    if total < min_bytes || n < 2 || rayon::current_num_threads() < 2 {
        let mut state = init();
        return jobs.into_iter().try_for_each(|j| read(&mut state, j));
    }
    let per_job = (min_bytes / 4 / (total / n).max(1)).max(1);
    jobs.into_par_iter()
        .with_min_len(per_job)
        .try_for_each_init(init, read)
}

/// How far ahead a raw copy loop of `w`-byte records prefetches, in
/// records, and how many cache lines of each: the first line [`AHEAD`]
/// records ahead, or for a record wider than a line all its lines about
/// 4 KiB ahead (measured 1.25× against 1.12× a plain loop's speed on
/// 784-byte images, `benches/layouts.rs`).
fn prefetch_plan(w: usize) -> (usize, usize) {
    if w > 64 {
        ((4096 / w).clamp(2, AHEAD), w.div_ceil(64))
    } else {
        (AHEAD, 1)
    }
}

/// Prefetches `lines` cache lines of `region` from byte `start` (any value:
/// a prefetch never faults).
#[inline(always)]
fn prefetch_lines(region: &[u8], start: usize, lines: usize) {
    let p = region.as_ptr().wrapping_add(start);
    for l in 0..lines {
        prefetch(p.wrapping_add(l * 64));
    }
}

/// Asks the CPU to start loading the cache line at `at` (a hint: nothing
/// is read into the program; a no-op off x86_64). Measured to pay where
/// finding a record costs table lookups (parts, block tables) and, issued
/// [`AHEAD`] records ahead inside the copy loop, in one store's regular
/// layout too (a separate prefetching pass first measured ~20 % slower).
#[inline(always)]
pub(super) fn prefetch(at: *const u8) {
    // SAFETY: a prefetch never faults and reads nothing into the program,
    // whatever the address; SSE is in every x86_64 target.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use proptest::prelude::*;

    use super::*;
    use crate::{CreateOptions, DynDense, DynDenseWriter, ErrorKind as Kind};

    /// The bytes of physical slot `slot` of shard `s`, `width` of them.
    fn slot_bytes(s: usize, slot: usize, width: usize) -> Vec<u8> {
        (0..width)
            .map(|b| (s * 131 + slot * 7 + b * 29 + (slot >> 8)) as u8)
            .collect()
    }

    /// How one shard's records are laid out: run lengths (covering its
    /// records in order), the order in which the runs are stored, and which
    /// runs alias the first run's bytes instead of having their own.
    #[derive(Debug, Clone)]
    struct ShardPlan {
        runs: Vec<usize>,
        order: Vec<u32>,
        alias: Vec<bool>,
    }

    /// Builds a raw `u8[width]` store of `n` records over `shards` shards,
    /// then rewrites its payloads and location table as `plans` say.
    /// Returns every record's expected bytes.
    fn forge(
        path: &Path,
        n: usize,
        width: usize,
        plans: &[ShardPlan],
        damage: Option<usize>,
    ) -> Vec<Vec<u8>> {
        let shards = plans.len();
        let opts = CreateOptions::new(Codec::Raw).data_shards(shards);
        let mut w = DynDenseWriter::create(path, crate::DType::U8, &[width], &opts).unwrap();
        w.append_bytes(&vec![0u8; n * width], n).unwrap();
        w.close().unwrap();
        let meta = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path.join(META_FILE))
            .unwrap();
        let mut expected = vec![Vec::new(); n];
        for (s, plan) in plans.iter().enumerate() {
            let count = (n + shards - 1 - s) / shards;
            // Runs of the shard's records 0..count.
            let mut runs = Vec::new();
            let mut k = 0;
            for &len in plan.runs.iter().cycle().take(count.max(1)) {
                if k >= count {
                    break;
                }
                let len = len.clamp(1, count - k);
                runs.push(k..k + len);
                k += len;
            }
            // Storage order of the runs that own bytes; the others alias run 0.
            let owners: Vec<usize> = (0..runs.len())
                .filter(|&r| r == 0 || !plan.alias.get(r).copied().unwrap_or(false))
                .collect();
            let mut stored = owners.clone();
            stored.sort_by_key(|&r| (plan.order.get(r).copied().unwrap_or(0), r));
            let mut file = Vec::new();
            let mut at = vec![0u64; runs.len()];
            for &r in &stored {
                at[r] = file.len() as u64;
                for k in runs[r].clone() {
                    file.extend(slot_bytes(s, k, width));
                }
            }
            for (r, run) in runs.iter().enumerate() {
                let (base, src) = if owners.contains(&r) {
                    (at[r], run.start)
                } else {
                    (at[0], runs[0].start)
                };
                for (j, k) in run.clone().enumerate() {
                    // An aliasing run longer than run 0 keeps its own tail.
                    let (offset, slot) = if j < runs[0].len() || owners.contains(&r) {
                        (base + (j * width) as u64, src + j)
                    } else {
                        let o = file.len() as u64;
                        file.extend(slot_bytes(s, k, width));
                        (o, k)
                    };
                    let id = k * shards + s;
                    expected[id] = slot_bytes(s, slot, width);
                    let loc = RecordLoc {
                        offset,
                        phys_length: width as u32,
                        logic_length: width as u32,
                    };
                    let loc = match damage {
                        Some(d) if d == id => RecordLoc {
                            offset: 0,
                            phys_length: width as u32 + 1,
                            ..loc
                        },
                        _ => loc,
                    };
                    meta.write_all_at(&loc.encode(), format::record_loc_offset(id as u64).unwrap())
                        .unwrap();
                }
            }
            std::fs::write(path.join(format::data_file(s)), &file).unwrap();
            let tail_at = (format::TAILS_OFFSET + 8 * s) as u64;
            meta.write_all_at(&(file.len() as u64).to_le_bytes(), tail_at)
                .unwrap();
        }
        expected
    }

    /// Gathers `indices` every way a raw Dense store can, on the detected
    /// layout and on the plain table; all must agree (errors by message).
    fn gather_all_ways(path: &Path, indices: &[u64], width: usize) -> Result<Vec<u8>, Error> {
        let mut reader = StoreReader::open(path).unwrap();
        let dense = DynDense::open(path).unwrap();
        let text = |r: &Result<Vec<u8>, Error>| r.as_ref().map_err(ToString::to_string).cloned();
        let owned = reader.gather_fixed_vec(indices, width);
        let mut into = vec![0u8; indices.len() * width];
        let into = reader
            .gather_fixed(indices, width, &mut into)
            .map(|()| into);
        assert_eq!(text(&owned), text(&into));
        assert_eq!(text(&owned), text(&dense.gather_bytes(indices)));
        if let Ok(bytes) = &owned {
            let mut k = 0;
            for &i in indices {
                let loc = reader.loc(i).unwrap();
                assert_eq!(
                    reader.stored(&Staged::Local, i, loc).unwrap(),
                    &bytes[k..k + width],
                    "record {i}"
                );
                k += width;
            }
        }
        reader.layout = Layout::Table;
        assert_eq!(text(&owned), text(&reader.gather_fixed_vec(indices, width)));
        owned
    }

    fn plans(shards: usize) -> impl Strategy<Value = Vec<ShardPlan>> {
        let plan = (
            prop::collection::vec(prop_oneof![1usize..4, 4usize..64, Just(usize::MAX)], 1..6),
            prop::collection::vec(any::<u32>(), 0..40),
            prop::collection::vec(prop::bool::weighted(0.2), 0..40),
        )
            .prop_map(|(runs, order, alias)| ShardPlan { runs, order, alias });
        prop::collection::vec(plan, shards)
    }

    fn case() -> impl Strategy<Value = (usize, usize, Vec<ShardPlan>, Vec<u64>, Option<usize>)> {
        (
            1usize..=5,
            prop::sample::select(vec![1usize, 2, 3, 4, 8, 16, 24, 64]),
            1usize..600,
        )
            .prop_flat_map(|(shards, width, n)| {
                (
                    Just(n),
                    Just(width),
                    plans(shards),
                    prop::collection::vec(0..n as u64, 0..300),
                    prop::option::weighted(0.2, 0..n),
                )
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn every_layout_gathers_what_the_table_says(
            (n, width, plans, indices, damage) in case()
        ) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("s");
            let expected = forge(&path, n, width, &plans, damage);
            let got = gather_all_ways(&path, &indices, width);
            match damage.filter(|d| indices.contains(&(*d as u64))) {
                Some(d) => prop_assert!(
                    matches!(got.as_ref().map_err(Error::kind), Err(Kind::CorruptRecord { index, .. }) if *index == d as u64),
                    "{:?}", got
                ),
                None => {
                    let want: Vec<u8> = indices.iter().flat_map(|&i| expected[i as usize].clone()).collect();
                    prop_assert_eq!(got.unwrap(), want);
                }
            }
            let reader = StoreReader::open(&path).unwrap();
            if damage.is_some() {
                prop_assert_eq!(reader.layout().blocks(), 0, "a damaged table is read per record");
            }
            // An index out of range is refused on every layout.
            let e = reader.gather_fixed_vec(&[n as u64], width).unwrap_err();
            let refused = matches!(e.kind(), Kind::IndexOutOfRange { .. });
            prop_assert!(refused, "{}", e);
        }
    }

    #[test]
    fn each_plan_finds_its_layout_and_big_gathers_agree() {
        let dir = tempfile::tempdir().unwrap();
        let n = 3 * PARALLEL_MIN_RECORDS;
        let indices: Vec<u64> = (0..n as u64).map(|i| (i * 7919) % n as u64).collect();
        let one = |runs: usize| ShardPlan {
            runs: vec![runs],
            order: (0..4096)
                .map(|r: u32| r.wrapping_mul(2_654_435_761))
                .collect(),
            alias: Vec::new(),
        };
        // (plan, regular, block table entries per shard)
        for (name, plan, regular, blocks) in [
            ("one run per shard", one(usize::MAX), true, 1),
            ("permuted runs", one(500), false, n.div_ceil(3 * 4)),
            ("runs of two", one(2), false, n.div_ceil(3 * 2)),
        ] {
            for width in [1, 8, 40] {
                let path = dir.path().join(format!("{name}-{width}"));
                let expected = forge(
                    &path,
                    n,
                    width,
                    &[plan.clone(), plan.clone(), plan.clone()],
                    None,
                );
                let reader = StoreReader::open(&path).unwrap();
                let l = reader.layout();
                assert_eq!(l.is_regular(), regular, "{name}");
                // Out of order, records of at most 8 bytes and records no
                // larger than their block table are copied in record order.
                let copied = !regular && (width <= 8 || width * n <= 3 * blocks * 8);
                let want = if copied { usize::MAX } else { 3 * blocks };
                assert_eq!(l.blocks(), want, "{name} u8[{width}]");
                let want: Vec<u8> = indices
                    .iter()
                    .flat_map(|&i| expected[i as usize].clone())
                    .collect();
                assert_eq!(
                    gather_all_ways(&path, &indices, width).unwrap(),
                    want,
                    "{name}"
                );
            }
        }
    }
}
