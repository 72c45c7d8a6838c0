//! Reading Ragged stores: [`DynRagged`] and the typed [`Ragged`].

use std::marker::PhantomData;
use std::path::Path;

use ndarray::ArrayD;

use super::{DynRaggedBatch, RaggedBatch};
use crate::Generation;
use crate::codec::{DICT_SAMPLE_BYTES, strided_sample, train_from_samples};
use crate::dtype::{DType, Element};
use crate::engine::{Engine, StoreReader};
use crate::error::{Error, ErrorKind, StoreKind};
use crate::format::Schema;

/// An open Ragged store, element type known at run time.
pub struct DynRagged {
    pub(super) engine: Engine,
    pub(super) dtype: DType,
    pub(super) ndim: usize,
    /// Bytes of each dimension length in a record's shape header: 8, or 4
    /// in the 2.8.19 generation.
    pub(super) dim_width: usize,
    /// The length index, built on first use ([`DynRagged::lengths`]).
    lengths: std::sync::OnceLock<crate::sequence::LengthIndex>,
}

impl DynRagged {
    crate::store::reader_accessors!();

    crate::store::store_openers!(
        "the Ragged store",
        "[`ErrorKind::KindMismatch`](crate::ErrorKind::KindMismatch) when the store is Dense."
    );

    /// Opens the Ragged store at `path`, reading it as a store of
    /// `generation` instead of detecting which JSON generation (2.8.18's
    /// `u64` dims or 2.8.19's `u32` ones) wrote it. Needed only for a store
    /// whose first records read consistently both ways, which
    /// [`open`](Self::open) refuses as ambiguous.
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open); [`ErrorKind::InvalidArgument`] when the
    /// schema's encoding is not `generation`'s (MsgPack for 2.4.6 and 2.8.12,
    /// JSON for 2.8.18 and 2.8.19).
    pub fn open_as(path: impl AsRef<Path>, generation: Generation) -> Result<DynRagged, Error> {
        let engine = crate::store::open_reader(path.as_ref())?;
        if engine.generation().json_schema() != generation.json_schema() {
            return Err(Error::invalid(format!(
                "{}: a store of the {} generation cannot be read as {generation}",
                engine.path().display(),
                engine.generation()
            )));
        }
        Self::with_generation(engine, generation)
    }

    /// This store, one empty store of a JSON generation, read as a store
    /// of `generation` (whose dims width nothing in it tells); any other
    /// store unchanged.
    pub(crate) fn with_generation_of_empty(
        self,
        generation: Generation,
    ) -> Result<DynRagged, Error> {
        match self.engine {
            Engine::Store(r)
                if r.len() == 0 && r.generation().json_schema() && generation.json_schema() =>
            {
                Self::with_generation(r, generation)
            }
            engine => Ok(DynRagged { engine, ..self }),
        }
    }

    pub(crate) fn from_engine(engine: StoreReader) -> Result<DynRagged, Error> {
        let generation = match *engine.schema() {
            Schema::Ragged { ndim, .. } if engine.generation().json_schema() => {
                detect_json_generation(&engine, ndim)?
            }
            _ => engine.generation(),
        };
        Self::with_generation(engine, generation)
    }

    fn with_generation(
        mut engine: StoreReader,
        generation: Generation,
    ) -> Result<DynRagged, Error> {
        engine.set_generation(generation);
        match *engine.schema() {
            Schema::Ragged { dtype, ndim } => Ok(DynRagged {
                engine: engine.into(),
                dtype,
                ndim,
                dim_width: generation.dim_width(),
                lengths: std::sync::OnceLock::new(),
            }),
            Schema::Dense { .. } => Err(ErrorKind::KindMismatch {
                path: engine.path().to_path_buf(),
                expected: StoreKind::Ragged,
                found: StoreKind::Dense,
            }
            .into()),
        }
    }

    /// Rank of every record.
    pub fn ndim(&self) -> usize {
        self.ndim
    }

    /// Reads `parts`, Ragged stores of one element type, rank and shape
    /// header width (generation family), as one store: their records end
    /// to end, as [`DynDense::concat`](crate::DynDense::concat) does for
    /// Dense stores (see there).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] for no part, parts of different
    /// element types, ranks or shape header widths (a 2.8.19 store's `u32`
    /// dims beside an older one's `u64`: [`migrate`](crate::migrate) one),
    /// or more than `2^64` records in all.
    pub fn concat(path: impl AsRef<Path>, parts: Vec<DynRagged>) -> Result<DynRagged, Error> {
        let path = path.as_ref();
        let Some(first) = parts.first() else {
            return Err(Error::invalid(format!(
                "{}: a concatenation needs at least one part",
                path.display()
            )));
        };
        let (dtype, ndim, dim_width) = (first.dtype, first.ndim, first.dim_width);
        let mut readers = Vec::new();
        for part in parts {
            if matches!(part.engine, Engine::Lazy(_)) {
                return Err(Error::invalid(format!(
                    "{}: part {} is converted lazily and cannot be concatenated \
                     (freeze it into a dataset first)",
                    path.display(),
                    part.path().display()
                )));
            }
            if (part.dtype, part.ndim, part.dim_width) != (dtype, ndim, dim_width) {
                return Err(Error::invalid(format!(
                    "{}: part {} holds {} records of rank {} with {}-byte dims, \
                     the first part {dtype} of rank {ndim} with {dim_width}-byte dims",
                    path.display(),
                    part.path().display(),
                    part.dtype,
                    part.ndim,
                    part.dim_width,
                )));
            }
            readers.extend(part.engine.into_stores());
        }
        Ok(DynRagged {
            engine: Engine::Parts(crate::engine::parts::Parts::new(path, readers)?),
            dtype,
            ndim,
            dim_width,
            lengths: std::sync::OnceLock::new(),
        })
    }

    /// Bytes of a record's shape header: `ndim` dimension lengths of 8
    /// bytes, or 4 in the 2.8.19 generation.
    pub fn shape_header_len(&self) -> usize {
        self.dim_width * self.ndim
    }

    /// Every record's length along its first axis (1 for scalar records),
    /// built once per open store and then served from memory; see
    /// [`LengthIndex::build`](crate::sequence::LengthIndex::build).
    ///
    /// # Errors
    ///
    /// As [`LengthIndex::build`](crate::sequence::LengthIndex::build).
    pub fn lengths(&self) -> Result<&crate::sequence::LengthIndex, Error> {
        if let Some(l) = self.lengths.get() {
            return Ok(l);
        }
        let built = crate::sequence::LengthIndex::build(self)?;
        Ok(self.lengths.get_or_init(|| built))
    }

    /// The validated location of record `index`.
    pub(crate) fn loc(&self, index: u64) -> Result<crate::format::RecordLoc, Error> {
        self.engine.loc(index)
    }

    /// Element bytes of all records, from the location table.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::CorruptRecord`] for a malformed location.
    pub fn logical_bytes(&self) -> Result<u64, Error> {
        let head = self.shape_header_len() as u64;
        (0..self.len()).try_fold(0u64, |acc, i| {
            let logic = u64::from(self.engine.loc(i)?.logic_length);
            Ok(acc + logic.saturating_sub(head))
        })
    }

    /// This store as `Ragged<T>`, if `T` is its element type.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::DTypeMismatch`] when `T` is not the store's element type.
    pub fn typed<T: Element>(self) -> Result<Ragged<T>, Error> {
        if self.dtype != T::DTYPE {
            return Err(ErrorKind::DTypeMismatch {
                path: self.path().to_path_buf(),
                expected: T::DTYPE,
                found: self.dtype,
            }
            .into());
        }
        Ok(Ragged {
            inner: self,
            _t: PhantomData,
        })
    }

    /// Trains a `zstd_dict` dictionary on an evenly strided sample of this store.
    ///
    /// # Errors
    ///
    /// As [`train_dict`](crate::train_dict()), and the errors of a gather
    /// ([`ErrorKind::CorruptRecord`]) for the sampled records.
    pub fn train_dict(&self) -> Result<Vec<u8>, Error> {
        let n = self.len();
        if n == 0 {
            return Err(ErrorKind::Dictionary {
                detail: "cannot train a dictionary on an empty store".into(),
            }
            .into());
        }
        let preview: Vec<u64> = (0..n.min(32)).collect();
        let batch = self.gather(&preview)?;
        let mean = (0..batch.len())
            .map(|i| batch.bytes(i).len())
            .sum::<usize>()
            / batch.len();
        let idx: Vec<u64> = strided_sample(usize::try_from(n).unwrap_or(usize::MAX), mean.max(1))
            .into_iter()
            .map(|i| i as u64)
            .collect();
        let mut data = Vec::new();
        let mut sizes = Vec::new();
        for chunk in idx.chunks(1024) {
            let batch = self.gather(chunk)?;
            for i in 0..batch.len() {
                let b = batch.bytes(i);
                if b.len() > DICT_SAMPLE_BYTES - data.len() {
                    if sizes.is_empty() {
                        return Err(ErrorKind::Dictionary {
                            detail: "one record exceeds the 4 MiB sample budget".into(),
                        }
                        .into());
                    }
                    return train_from_samples(&data, &sizes);
                }
                data.extend_from_slice(b);
                sizes.push(b.len());
            }
        }
        train_from_samples(&data, &sizes)
    }
}

/// An open Ragged store of element type `T`; see
/// [`RaggedWriter`](crate::RaggedWriter) for an example.
///
/// The Ragged contract: fixed element type and rank, per-record dimension lengths.
///
/// A gathered batch is one allocation holding every record plus their shapes
/// and byte offsets ([`RaggedBatch`]); each record is viewed as an
/// `ArrayViewD` without copying. Inside the allocation each record occupies
/// an 8-byte-aligned segment: its stored dimension header, then its elements,
/// which therefore start 8-byte aligned.
pub struct Ragged<T: Element> {
    inner: DynRagged,
    _t: PhantomData<fn() -> T>,
}

impl<T: Element> Ragged<T> {
    crate::store::typed_accessors!(DynRagged);

    /// Opens the store at `path`; its element type must be `T`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::NotAStore`] when `path` holds no store, [`ErrorKind::NotPublished`]
    /// when its writer never closed it, [`ErrorKind::Busy`] while a writer holds it,
    /// [`ErrorKind::Corrupt`] for malformed metadata (header, schema, including an
    /// element type loaderx does not know, shard files, dictionary), and
    /// [`ErrorKind::Io`] when a file cannot be read or locked.
    /// [`ErrorKind::KindMismatch`] when the store is Dense, and
    /// [`ErrorKind::DTypeMismatch`] when its element type is not `T`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, Error> {
        DynRagged::open(path)?.typed()
    }

    /// Rank of every record.
    pub fn ndim(&self) -> usize {
        self.inner.ndim()
    }

    /// Gathers the records at `indices`, in order.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::IndexOutOfRange`] for an index past the end;
    /// [`ErrorKind::CorruptRecord`] for a record whose location, shape header or
    /// payload is malformed (including a `bool` byte other than 0 or 1), naming the
    /// first such record in `indices`; [`ErrorKind::Buffer`] when the output cannot be
    /// allocated.
    pub fn gather(&self, indices: &[u64]) -> Result<RaggedBatch<T>, Error> {
        self.typed(self.inner.gather(indices)?, indices)
    }

    /// `batch`, gathered from `indices`, typed. Only `bool` can fail here:
    /// the error names the first record holding a bad byte.
    fn typed(&self, batch: DynRaggedBatch, indices: &[u64]) -> Result<RaggedBatch<T>, Error> {
        let bad = (0..batch.len()).find(|&k| T::try_from_bytes(batch.bytes(k)).is_none());
        match bad {
            None => batch.typed(),
            Some(k) => Err(Error::corrupt_record(
                self.inner.path(),
                indices[k],
                "a bool record holds a byte other than 0 or 1",
            )),
        }
    }

    /// Gathers the records at `indices`, in order, packed: their elements
    /// end to end in one allocation (see
    /// [`DynRagged::gather_packed`]).
    ///
    /// # Errors
    ///
    /// As [`gather`](Self::gather).
    pub fn gather_packed(&self, indices: &[u64]) -> Result<RaggedBatch<T>, Error> {
        self.typed(self.inner.gather_packed(indices)?, indices)
    }

    /// One record as an owned array.
    ///
    /// # Errors
    ///
    /// As [`gather`](Self::gather).
    pub fn get(&self, index: u64) -> Result<ArrayD<T>, Error> {
        Ok(self.gather(&[index])?.view(0).to_owned())
    }

    /// The records of `range`, in order.
    ///
    /// # Errors
    ///
    /// As [`gather`](Self::gather).
    pub fn range(&self, range: std::ops::Range<u64>) -> Result<RaggedBatch<T>, Error> {
        let indices: Vec<u64> = range.collect();
        self.gather(&indices)
    }

    /// Trains a `zstd_dict` dictionary on an evenly strided sample of this store.
    ///
    /// # Errors
    ///
    /// As [`DynRagged::train_dict`].
    pub fn train_dict(&self) -> Result<Vec<u8>, Error> {
        self.inner.train_dict()
    }
}

/// How many of a JSON Ragged store's first records [`detect_json_generation`]
/// reads before it calls the store ambiguous.
const DETECT_RECORDS: u64 = 8;

/// Tells 2.8.18 (`u64` dims) from 2.8.19 (`u32` dims) by the first records:
/// a reading is consistent when the record's length is its header plus the
/// elements its dims count. An empty store is 2.8.19's (either reading
/// reads it). One record is read whole for each step of this.
fn detect_json_generation(engine: &StoreReader, ndim: usize) -> Result<Generation, Error> {
    let Schema::Ragged { dtype, .. } = *engine.schema() else {
        return Ok(engine.generation());
    };
    for i in 0..engine.len().min(DETECT_RECORDS) {
        // The shorter header bounds the plan; each reading checks its own.
        let plan = engine.plan_varlen(&[i], 4 * ndim)?;
        let mut buf = vec![0u8; plan.len()];
        let bytes = engine.gather_varlen(&plan, &mut buf[..])?;
        let Some((_, start, len)) = plan.records().next() else {
            break;
        };
        let record = &bytes[start..start + len];
        // No generation that writes JSON stores empty records, so a
        // reading that makes one is not consistent either.
        let fits = |width: usize| {
            super::gather::parse_shape(record, ndim, width, dtype.size())
                .is_some_and(|shape| shape.iter().all(|&d| d > 0))
        };
        match (fits(8), fits(4)) {
            (true, false) => return Ok(Generation::V2_8_18),
            (false, true) => return Ok(Generation::V2_8_19),
            (true, true) => continue,
            (false, false) => {
                return Err(Error::corrupt_record(
                    engine.path(),
                    i,
                    format!(
                        "a {len}-byte record of a JSON-schema Ragged store whose shape header \
                         reads neither as {ndim} u64 (2.8.18) nor as {ndim} u32 (2.8.19) \
                         dimensions"
                    ),
                ));
            }
        }
    }
    if engine.len() == 0 {
        return Ok(Generation::V2_8_19);
    }
    Err(Error::invalid(format!(
        "{}: the first records read consistently with both u64 (2.8.18) and u32 (2.8.19) \
         dimensions; open it with DynRagged::open_as and the generation that wrote it",
        engine.path().display()
    )))
}
