//! Opening a published store and gathering its records.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use rayon::prelude::*;

use crate::codec::{Codec, CodecState, Decoder, MAX_DICT_LEN};
use crate::engine::files;
use crate::error::{Error, ErrorKind};
use crate::format::{
    self, DICT_FILE, MAX_DATA_SHARDS, MAX_RECORD_LEN, MAX_SCHEMA_LEN, META_FILE, RECORD_LOC_LEN,
    RecordLoc, STATIC_PAGE_LEN, Schema, StaticPage,
};

/// Gathers smaller than this many bytes run on the calling thread.
const PARALLEL_MIN_BYTES: usize = 256 << 10;
/// No zstd frame decodes to more than this many times its size: a block
/// decodes to at most 128 KiB and takes at least 4 bytes (an RLE block).
const ZSTD_MAX_EXPANSION: u64 = 32 << 10;

/// A published store opened read-only, holding a shared lock.
pub(crate) struct StoreReader {
    path: PathBuf,
    _meta: File,
    table: Option<Mmap>,
    shards: Vec<Shard>,
    /// `shards.len() - 1` when the shard count is a power of two (the
    /// default 4 is), so a record's shard is a mask instead of a division.
    shard_mask: Option<u64>,
    length: u64,
    schema: Schema,
    codec: CodecState,
    dict: Option<Vec<u8>>,
}

struct Shard {
    map: Option<Mmap>,
    tail: u64,
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

impl StoreReader {
    /// Opens and validates the store at `path`.
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
        if meta_len < STATIC_PAGE_LEN as u64 {
            if meta_len == 0 {
                return Err(ErrorKind::NotPublished {
                    path: path.to_path_buf(),
                }
                .into());
            }
            return Err(Error::corrupt(
                &meta_path,
                format!("meta.zr is {meta_len} bytes, shorter than its 4096-byte static page"),
            ));
        }
        let mut raw = [0u8; STATIC_PAGE_LEN];
        meta.read_exact_at(&mut raw, 0)
            .map_err(|e| Error::io(&meta_path, e))?;
        let page = StaticPage::decode(&raw);
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
        let schema = Schema::decode(&page.schema).map_err(bad)?;

        let dict_path = path.join(DICT_FILE);
        let dict = match files::open_regular(&dict_path)? {
            None => None,
            Some(_) if codec != Codec::ZstdDict => {
                return Err(Error::corrupt(
                    path,
                    format!("{codec} store has an unexpected dict.zr"),
                ));
            }
            Some((_, len)) if len > MAX_DICT_LEN as u64 => {
                return Err(Error::corrupt(
                    &dict_path,
                    format!("dict.zr is {len} bytes, more than the {MAX_DICT_LEN}-byte limit"),
                ));
            }
            Some((f, len)) => {
                // The length was bounded above; read no more than it, and
                // notice a file that changed size underneath.
                let mut d = vec![0u8; len as usize];
                f.read_exact_at(&mut d, 0)
                    .map_err(|e| Error::io(&dict_path, e))?;
                Some(d)
            }
        };
        let codec = match (codec, &dict) {
            (Codec::ZstdDict, None) => {
                return Err(Error::corrupt(path, "zstd_dict store has no dict.zr"));
            }
            (Codec::ZstdDict, Some(d)) if d.is_empty() => {
                return Err(Error::corrupt(&dict_path, "dict.zr is empty"));
            }
            // A raw or zstd store with a dict.zr was refused where the file was read.
            _ => CodecState::new(codec, dict.as_deref(), false)
                .map_err(|e| Error::corrupt(path, e))?,
        };

        let mut shards = Vec::with_capacity(shard_count);
        for s in 0..shard_count {
            let p = path.join(format::data_file(s));
            let Some((f, len)) = files::open_regular(&p)? else {
                return Err(Error::corrupt(&p, "payload shard is missing"));
            };
            let tail = page.tails[s];
            if len < tail {
                return Err(Error::corrupt(
                    &p,
                    format!("payload shard is {len} bytes but its committed tail is {tail}"),
                ));
            }
            shards.push(Shard {
                map: files::map(&f, tail, &p)?,
                tail,
            });
        }
        let table = files::map(&meta, table_end, &meta_path)?;
        Ok(StoreReader {
            path: path.to_path_buf(),
            _meta: meta,
            table,
            shard_mask: shard_count
                .is_power_of_two()
                .then(|| shard_count as u64 - 1),
            shards,
            length: h.length,
            schema,
            codec,
            dict,
        })
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

    pub(crate) fn codec(&self) -> Codec {
        self.codec.codec()
    }

    pub(crate) fn data_shards(&self) -> usize {
        self.shards.len()
    }

    pub(crate) fn dict(&self) -> Option<&[u8]> {
        self.dict.as_deref()
    }

    /// Bytes on disk: payload shards at their tails, location table, dictionary.
    pub(crate) fn stored_bytes(&self) -> u64 {
        let payload: u64 = self.shards.iter().map(|s| s.tail).sum();
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

    /// The payload shard holding record `index`.
    fn shard_of(&self, index: u64) -> &Shard {
        let s = match self.shard_mask {
            Some(mask) => index & mask,
            None => index % self.shards.len() as u64,
        };
        &self.shards[s as usize]
    }

    /// The validated location of record `index` and its shard.
    fn located(&self, index: u64) -> Result<(RecordLoc, &Shard), Error> {
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
        Ok((loc, shard))
    }

    /// A decoder for one worker.
    pub(crate) fn decoder(&self) -> io::Result<Decoder<'_>> {
        self.codec.decoder()
    }

    /// Decodes record `index`, located at `loc`, into `dst` (exactly its logical length).
    pub(crate) fn read_at(
        &self,
        index: u64,
        loc: RecordLoc,
        dst: &mut [u8],
        dec: &mut Decoder<'_>,
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
        dec.decode(self.stored(index, loc), dst)
            .map_err(|e| Error::corrupt_record(&self.path, index, e))
    }

    /// The stored bytes of record `index` at `loc`, a location [`Self::loc`] validated.
    fn stored(&self, index: u64, loc: RecordLoc) -> &[u8] {
        let shard = self.shard_of(index);
        let start = loc.offset as usize;
        &shard.bytes()[start..start + loc.phys_length as usize]
    }

    /// Checks that the stored bytes of record `index` at `loc` (validated by
    /// [`Self::loc`]) can decode to its logical length, for callers that size
    /// memory by that length before decoding: a raw record stores exactly its
    /// logical bytes; a zstd frame that declares its content size (loaderx's
    /// always do) must declare this one, and whatever it declares, no frame
    /// expands more than [`ZSTD_MAX_EXPANSION`] times its stored size. A
    /// corrupt location table or a forged frame header then cannot make a
    /// gather allocate more than the store's bytes could ever decode to.
    pub(crate) fn check_logical_length(&self, index: u64, loc: RecordLoc) -> Result<(), Error> {
        let logic = u64::from(loc.logic_length);
        let phys = u64::from(loc.phys_length);
        let declared = match self.codec.codec() {
            Codec::Raw => Some(phys),
            Codec::Zstd | Codec::ZstdDict => {
                zstd::zstd_safe::get_frame_content_size(self.stored(index, loc)).map_err(|_| {
                    Error::corrupt_record(&self.path, index, "stored bytes are not a zstd frame")
                })?
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

    /// Decodes every `(index, destination)` job, in parallel when worth it.
    pub(crate) fn read_jobs(&self, jobs: Vec<(u64, RecordLoc, &mut [u8])>) -> Result<(), Error> {
        let total: usize = jobs.iter().map(|j| j.2.len()).sum();
        let io_err = |e: &io::Error| Error::io(&self.path, io::Error::new(e.kind(), e.to_string()));
        // Decompression is CPU-bound: worth fanning out far sooner than a memcpy.
        let min_bytes = match self.codec() {
            Codec::Raw => PARALLEL_MIN_BYTES,
            Codec::Zstd | Codec::ZstdDict => PARALLEL_MIN_BYTES / 16,
        };
        if total < min_bytes || jobs.len() < 2 || rayon::current_num_threads() < 2 {
            let mut dec = self.decoder().map_err(|e| io_err(&e))?;
            for (index, loc, dst) in jobs {
                self.read_at(index, loc, dst, &mut dec)?;
            }
            return Ok(());
        }
        let per_job = (min_bytes / 4 / (total / jobs.len()).max(1)).max(1);
        jobs.into_par_iter()
            .with_min_len(per_job)
            .try_for_each_init(
                || self.decoder(),
                |dec, (index, loc, dst)| {
                    let dec = dec.as_mut().map_err(|e| io_err(e))?;
                    self.read_at(index, loc, dst, dec)
                },
            )
    }

    /// Gathers fixed-width records into `dst` (`indices.len() * width` bytes).
    pub(crate) fn gather_fixed(
        &self,
        indices: &[u64],
        width: usize,
        dst: &mut [u8],
    ) -> Result<(), Error> {
        let need = indices.len().checked_mul(width);
        if need != Some(dst.len()) {
            return Err(ErrorKind::Buffer {
                detail: format!(
                    "{} records of {width} bytes need {} bytes, got {}",
                    indices.len(),
                    indices.len().saturating_mul(width),
                    dst.len()
                ),
            }
            .into());
        }
        self.check_indices(indices)?;
        if width == 0 {
            return Ok(());
        }
        let jobs = indices
            .iter()
            .zip(dst.chunks_exact_mut(width))
            .map(|(&i, d)| Ok((i, self.loc(i)?, d)))
            .collect::<Result<Vec<_>, Error>>()?;
        self.read_jobs(jobs)
    }

    /// Gathers fixed-width records into a new vector. Raw records are copied
    /// straight out of the mapped shards into fresh memory (never zeroed
    /// first: for small records the zeroing costs as much as the copy);
    /// compressed ones decode as in [`Self::gather_fixed`].
    pub(crate) fn gather_fixed_vec(&self, indices: &[u64], width: usize) -> Result<Vec<u8>, Error> {
        self.check_indices(indices)?;
        let total = indices
            .len()
            .checked_mul(width)
            .ok_or_else(|| ErrorKind::Buffer {
                detail: format!("{} records of {width} bytes overflow memory", indices.len()),
            })?;
        let mut out = Vec::new();
        out.try_reserve_exact(total)
            .map_err(|_| ErrorKind::Buffer {
                detail: format!("cannot allocate {total} bytes for the gather"),
            })?;
        if self.codec() != Codec::Raw || width == 0 {
            out.resize(total, 0);
            self.gather_fixed(indices, width, &mut out)?;
            return Ok(out);
        }
        let record = |index: u64| -> Result<&[u8], Error> {
            let (loc, shard) = self.located(index)?;
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
            Ok(&shard.bytes()[start..start + width])
        };
        // Locations are resolved for a run of records before any is copied:
        // the table reads are independent, so their cache and TLB misses
        // overlap instead of queueing behind each copy.
        let threads = rayon::current_num_threads();
        if total < PARALLEL_MIN_BYTES || indices.len() < 2 || threads < 2 {
            let sources = indices
                .iter()
                .map(|&i| record(i))
                .collect::<Result<Vec<_>, Error>>()?;
            for src in sources {
                out.extend_from_slice(src);
            }
            return Ok(out);
        }
        let per_job = indices.len().div_ceil(2 * threads).max(1);
        out.spare_capacity_mut()[..total]
            .par_chunks_mut(width * per_job)
            .zip(indices.par_chunks(per_job))
            .try_for_each(|(dst, chunk)| {
                let sources = chunk
                    .iter()
                    .map(|&i| record(i))
                    .collect::<Result<Vec<_>, Error>>()?;
                for (d, src) in dst.chunks_exact_mut(width).zip(sources) {
                    d.write_copy_of_slice(src);
                }
                Ok::<(), Error>(())
            })?;
        // SAFETY: the capacity was reserved above and the loop, which returned
        // without error, wrote all `total` bytes (`indices.len()` chunks of
        // `width`); `u8` has no invalid values.
        unsafe { out.set_len(total) };
        Ok(out)
    }
}
