//! IDX files (the MNIST file format) to Zrecord.
//!
//! An IDX file is two zero bytes, a type code (`0x08` u8, `0x09` i8, `0x0B`
//! i16, `0x0C` i32, `0x0D` f32, `0x0E` f64), the number of dimensions, each
//! dimension as a big-endian u32, then the big-endian elements in C order.
//! Files may be gzip-compressed (`.gz`).
//!
//! [`convert_idx_dir`] turns the four standard MNIST / Fashion-MNIST files
//! into `OUT/{train,test}/{image,label}`:
//!
//! ```no_run
//! use loaderx_core::Codec;
//! use loaderx_convert::idx::convert_idx_dir;
//!
//! let summary = convert_idx_dir("/usr/share/datasets/fashion-mnist", "fashion", Codec::Zstd, 4)?;
//! assert_eq!(summary.splits[0].records, 60_000);
//! # Ok::<(), loaderx_convert::Error>(())
//! ```
//!
//! The codec may be forced (a [`Codec`]) or, with
//! [`CodecChoice::Auto`] (or `None`), chosen per
//! store from a sample of its records ([`crate::codec`]): one-byte labels
//! stay raw, where a zstd frame per label would store several times their
//! bytes.

use std::fmt;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use flate2::read::GzDecoder;

use loaderx_core::{
    Codec, CreateOptions, DType, DynDenseWriter, Generation, train_dict, train_dict_from_array,
};

use crate::codec::{self, CodecChoice, CodecDecision};
use crate::error::Error;
use crate::output::{PartLock, StagedRoot};

fn idx_error(path: &Path, detail: impl Into<String>) -> Error {
    Error::Idx {
        path: path.to_path_buf(),
        detail: detail.into(),
    }
}

/// A decoded IDX array: little-endian C-order elements.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct IdxArray {
    /// Element type.
    pub dtype: DType,
    /// Dimensions; the first one counts records.
    pub dims: Vec<usize>,
    /// Elements, little-endian, C order.
    pub data: Vec<u8>,
}

fn idx_dtype(code: u8) -> Option<DType> {
    Some(match code {
        0x08 => DType::U8,
        0x09 => DType::I8,
        0x0B => DType::I16,
        0x0C => DType::I32,
        0x0D => DType::F32,
        0x0E => DType::F64,
        _ => return None,
    })
}

/// Reads one IDX file (gzip-compressed when its name ends in `.gz`).
///
/// # Errors
///
/// [`Error::Io`] when the file cannot be opened; [`Error::Idx`] when its data
/// cannot be read or is malformed (bad magic, unknown type code, no dimensions, a
/// size that overflows or does not match the dimensions).
pub fn read_idx(path: impl AsRef<Path>) -> Result<IdxArray, Error> {
    let path = path.as_ref();
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    if path.extension().is_some_and(|e| e == "gz") {
        read_idx_from(GzDecoder::new(BufReader::new(file)), path)
    } else {
        read_idx_from(BufReader::new(file), path)
    }
}

/// Reads one (uncompressed) IDX array from `reader`; `path` names it in
/// errors.
pub(crate) fn read_idx_from(reader: impl Read, path: &Path) -> Result<IdxArray, Error> {
    let mut reader = reader;
    let io = |e: std::io::Error| idx_error(path, format!("cannot read IDX data: {e}"));
    let mut magic = [0u8; 4];
    reader.read_exact(&mut magic).map_err(io)?;
    if magic[0] != 0 || magic[1] != 0 {
        return Err(idx_error(path, "not an IDX file (bad magic)"));
    }
    let dtype = idx_dtype(magic[2])
        .ok_or_else(|| idx_error(path, format!("unknown IDX type code 0x{:02x}", magic[2])))?;
    let ndims = usize::from(magic[3]);
    if ndims == 0 {
        return Err(idx_error(path, "IDX file declares zero dimensions"));
    }
    let mut dims = Vec::with_capacity(ndims);
    for _ in 0..ndims {
        let mut d = [0u8; 4];
        reader.read_exact(&mut d).map_err(io)?;
        dims.push(u32::from_be_bytes(d) as usize);
    }
    let bytes = dims
        .iter()
        .try_fold(dtype.size(), |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| idx_error(path, format!("dimensions {dims:?} overflow")))?;
    // Read what is there (never allocating from the header alone), then
    // check; one byte more than the dimensions need tells trailing bytes.
    let limit = u64::try_from(bytes)
        .ok()
        .and_then(|b| b.checked_add(1))
        .ok_or_else(|| idx_error(path, format!("dimensions {dims:?} overflow")))?;
    let mut data = Vec::new();
    reader.take(limit).read_to_end(&mut data).map_err(io)?;
    if data.len() != bytes {
        return Err(idx_error(
            path,
            format!(
                "dimensions {dims:?} need {bytes} bytes of data, file holds {}{}",
                data.len().min(bytes),
                if data.len() > bytes {
                    " and more (trailing bytes)"
                } else {
                    ""
                }
            ),
        ));
    }
    if dtype.size() > 1 {
        for chunk in data.chunks_exact_mut(dtype.size()) {
            chunk.reverse();
        }
    }
    Ok(IdxArray { dtype, dims, data })
}

/// One converted split.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct IdxSplit {
    /// `train` or `test`.
    pub name: String,
    /// Records in each of its stores.
    pub records: u64,
    /// Shape of one image.
    pub image_shape: Vec<usize>,
    /// The codec of its `image` store, and why.
    pub image_codec: CodecDecision,
    /// The codec of its `label` store, and why.
    pub label_codec: CodecDecision,
}

impl fmt::Display for IdxSplit {
    /// `train: 60000 records of [28, 28]`, then a line per store with its
    /// codec.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} records of {:?}\n  image: {}\n  label: {}",
            self.name, self.records, self.image_shape, self.image_codec, self.label_codec
        )
    }
}

/// What [`convert_idx_dir`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct IdxSummary {
    /// The published root.
    pub root: PathBuf,
    /// The splits, train first.
    pub splits: Vec<IdxSplit>,
}

impl fmt::Display for IdxSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "wrote {}", self.root.display())?;
        for s in &self.splits {
            write!(f, "\n{s}")?;
        }
        Ok(())
    }
}

const SPLITS: [(&str, &str); 2] = [("train", "train"), ("test", "t10k")];

/// Every split's images and labels in `dir`, checked: `(split, images,
/// labels)`, train first.
fn read_splits(dir: &Path) -> Result<Vec<(&'static str, IdxArray, IdxArray)>, Error> {
    let mut out = Vec::new();
    for (split, prefix) in SPLITS {
        let images_path = find(dir, &format!("{prefix}-images-idx3-ubyte"))?;
        let labels_path = find(dir, &format!("{prefix}-labels-idx1-ubyte"))?;
        let images = read_idx(&images_path)?;
        let labels = read_idx(&labels_path)?;
        if images.dims.len() < 2 {
            return Err(idx_error(&images_path, "images need at least 2 dimensions"));
        }
        if labels.dims.len() != 1 {
            return Err(idx_error(
                &labels_path,
                format!("labels must be 1-dimensional, got {:?}", labels.dims),
            ));
        }
        if images.dims[0] != labels.dims[0] {
            return Err(idx_error(
                dir,
                format!(
                    "{split}: {} images but {} labels",
                    images.dims[0], labels.dims[0]
                ),
            ));
        }
        out.push((split, images, labels));
    }
    Ok(out)
}

fn find(dir: &Path, stem: &str) -> Result<PathBuf, Error> {
    let plain = dir.join(stem);
    let gz = dir.join(format!("{stem}.gz"));
    [plain, gz]
        .into_iter()
        .find(|p| p.is_file())
        .ok_or_else(|| idx_error(dir, format!("missing {stem} (or {stem}.gz)")))
}

/// Writes `array` as a Dense store of `item_shape` records at `path`;
/// returns its codec and why.
fn write_store(
    path: &Path,
    array: &IdxArray,
    item_shape: &[usize],
    codec: CodecChoice,
    shards: usize,
    generation: Generation,
) -> Result<CodecDecision, Error> {
    let records = array.dims[0];
    let width = array.data.len() / records.max(1);
    let decision = codec::decide(codec, None, records as u64, |i| {
        let start = usize::try_from(i)
            .unwrap_or(usize::MAX)
            .saturating_mul(width);
        (&[][..], &array.data[start..start + width])
    })
    .map_err(|e| Error::io(path, e))?;
    let codec = decision.codec;
    let mut options = CreateOptions::new(codec)
        .data_shards(shards)
        .generation(generation);
    if codec == Codec::ZstdDict {
        let mut shape = vec![records];
        shape.extend_from_slice(item_shape);
        let dict = match array.dtype {
            DType::U8 => train_dict_from_array(
                &ndarray::ArrayViewD::from_shape(shape, &array.data).map_err(Error::invalid)?,
            )?,
            // Other types train on their bytes as records of u8.
            _ => train_dict(
                array
                    .data
                    .chunks((array.data.len() / records.max(1)).max(1)),
            )?,
        };
        options = options.dict_bytes(dict);
    }
    let mut w = DynDenseWriter::create(path, array.dtype, item_shape, &options)?;
    if records > 0 {
        w.append_bytes(&array.data, records)?;
    }
    w.close()?;
    Ok(decision)
}

/// Converts the standard MNIST-format files in `dir` (`train-images-idx3-ubyte`,
/// `train-labels-idx1-ubyte`, `t10k-images-idx3-ubyte`, `t10k-labels-idx1-ubyte`,
/// each optionally `.gz`) to `out/{train,test}/{image,label}`, with codec
/// `codec`: a [`Codec`] forces it, [`CodecChoice::Auto`] (or `None`)
/// chooses each store's from a sample of its records.
///
/// # Errors
///
/// [`Error::Idx`] when a file is missing or malformed, or images and labels
/// disagree in count; [`Error::AlreadyExists`] when `out` exists; [`Error::Store`]
/// and [`Error::Io`] from writing. Nothing is left at `out` after a failure.
pub fn convert_idx_dir(
    dir: impl AsRef<Path>,
    out: impl AsRef<Path>,
    codec: impl Into<CodecChoice>,
    shards: usize,
) -> Result<IdxSummary, Error> {
    convert_idx_dir_as(dir, out, codec, shards, Generation::DEFAULT)
}

/// [`convert_idx_dir`], writing stores of the format generation
/// `generation` (see [`CreateOptions::generation`]).
///
/// # Errors
///
/// As [`convert_idx_dir`]; [`Error::Store`] for a generation this crate does
/// not write.
pub fn convert_idx_dir_as(
    dir: impl AsRef<Path>,
    out: impl AsRef<Path>,
    codec: impl Into<CodecChoice>,
    shards: usize,
    generation: Generation,
) -> Result<IdxSummary, Error> {
    let codec = codec.into();
    let dir = dir.as_ref();
    let root = StagedRoot::new(out)?;
    let mut splits = Vec::new();
    for (split, images, labels) in read_splits(dir)? {
        let image_shape = images.dims[1..].to_vec();
        let image_codec = write_store(
            &root.store_path(split, "image")?,
            &images,
            &image_shape,
            codec,
            shards,
            generation,
        )?;
        let label_codec = write_store(
            &root.store_path(split, "label")?,
            &labels,
            &[],
            codec,
            shards,
            generation,
        )?;
        splits.push(IdxSplit {
            name: split.to_owned(),
            records: images.dims[0] as u64,
            image_shape,
            image_codec,
            label_codec,
        });
    }
    Ok(IdxSummary {
        root: root.publish()?,
        splits,
    })
}

/// Converts writer `part`'s share of the MNIST-format files in `dir` (see
/// [`convert_idx_dir`]) into part `part` of a multi-part dataset per split:
/// `out/{train,test}/part-<part>/{image,label}`, holding records
/// [`Dataset::part_range`](loaderx_core::Dataset::part_range)`(n, part,
/// parts)` of each split. Writers `0..parts` may run at once, on any
/// machines sharing `out` (or pushing it); `loaderx dataset merge
/// out/<split>` ([`Dataset::merge`](loaderx_core::Dataset::merge)) then
/// joins each split, whose digest equals a single conversion's. The part
/// is staged aside (`out/.part-<part>.tmp-…`) and renamed into place for
/// every split or for none; the writer holds the lock file
/// `out/.part-<part>.lock` ([`PartLock`]) while it runs, and removes the
/// staging a killed writer of the part left. A part is written once: a
/// retry of a finished writer fails at once, changing nothing.
///
/// # Errors
///
/// As [`convert_idx_dir`]; [`Error::InvalidOption`] for `part >= parts`;
/// [`Error::AlreadyExists`] when the part exists for a split (nothing is
/// written); [`Error::PartBusy`] while another writer of the part runs.
pub fn convert_idx_part(
    dir: impl AsRef<Path>,
    out: impl AsRef<Path>,
    options: &IdxOptions,
    part: u64,
    parts: u64,
) -> Result<IdxSummary, Error> {
    if part >= parts {
        return Err(Error::invalid(format!(
            "part {part} of {parts}: a part index runs from 0 to {}",
            parts.saturating_sub(1)
        )));
    }
    let (dir, out) = (dir.as_ref(), out.as_ref());
    let read = read_splits(dir)?;
    let name = loaderx_core::Dataset::part_name(part);
    let lock = PartLock::acquire(out, &name)?;
    let names: Vec<String> = read.iter().map(|(split, _, _)| split.to_string()).collect();
    lock.check_unpublished(&names)?;
    let root = StagedRoot::new(out.join(&name))?;
    let mut splits = Vec::new();
    for (split, images, labels) in read {
        let n = images.dims[0] as u64;
        let range = loaderx_core::Dataset::part_range(n, part, parts);
        let image_shape = images.dims[1..].to_vec();
        let mut decisions = Vec::with_capacity(2);
        for (column, array, shape) in [
            ("image", &images, &image_shape[..]),
            ("label", &labels, &[][..]),
        ] {
            let width = array.data.len() / array.dims[0].max(1);
            let (start, end) = (range.start as usize * width, range.end as usize * width);
            let mut dims = array.dims.clone();
            dims[0] = (range.end - range.start) as usize;
            let slice = IdxArray {
                dtype: array.dtype,
                dims,
                data: array.data[start..end].to_vec(),
            };
            decisions.push(write_store(
                &root.store_path(split, column)?,
                &slice,
                shape,
                options.codec,
                options.shards,
                options.generation,
            )?);
        }
        let [image_codec, label_codec] = decisions[..] else {
            return Err(Error::invalid("an IDX split has two stores"));
        };
        splits.push(IdxSplit {
            name: split.to_owned(),
            records: range.end - range.start,
            image_shape,
            image_codec,
            label_codec,
        });
    }
    root.publish_part(out, &name, &names)?;
    drop(lock);
    Ok(IdxSummary {
        root: out.to_path_buf(),
        splits,
    })
}

/// How [`convert_idx_part`] writes its stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct IdxOptions {
    /// The codec: forced, or chosen per store.
    pub codec: CodecChoice,
    /// Payload shards per store.
    pub shards: usize,
    /// The format generation.
    pub generation: Generation,
}

impl IdxOptions {
    /// `codec` (a [`Codec`], or [`CodecChoice::Auto`] / `None` for a
    /// choice per store), `shards` payload shards, the default generation.
    pub fn new(codec: impl Into<CodecChoice>, shards: usize) -> IdxOptions {
        IdxOptions {
            codec: codec.into(),
            shards,
            generation: Generation::DEFAULT,
        }
    }

    /// The format generation of the stores.
    pub fn generation(mut self, generation: Generation) -> IdxOptions {
        self.generation = generation;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idx(code: u8, dims: &[u32], data: &[u8]) -> Vec<u8> {
        let mut out = vec![0, 0, code, dims.len() as u8];
        for d in dims {
            out.extend_from_slice(&d.to_be_bytes());
        }
        out.extend_from_slice(data);
        out
    }

    #[test]
    fn reads_and_validates() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a");
        std::fs::write(&p, idx(0x0B, &[2], &[0x01, 0x02, 0xff, 0xfe])).unwrap();
        let a = read_idx(&p).unwrap();
        assert_eq!(a.dtype, DType::I16);
        assert_eq!(a.data, [0x02, 0x01, 0xfe, 0xff]);
        for (bytes, why) in [
            (idx(0x08, &[3], &[1, 2]), "need 3 bytes"),
            (idx(0x08, &[1], &[1, 2]), "trailing"),
            (idx(0x07, &[1], &[1]), "type code"),
            (vec![1, 0, 8, 1, 0, 0, 0, 1, 5], "magic"),
            (idx(0x08, &[], &[]), "zero dimensions"),
            (idx(0x08, &[u32::MAX, u32::MAX, u32::MAX], &[1]), "overflow"),
            // 65535 * 42009217 * 6700417 is exactly u64::MAX bytes: one
            // more (to tell trailing bytes) used to overflow.
            (idx(0x08, &[65535, 42_009_217, 6_700_417], &[1]), "overflow"),
            (vec![0, 0], "cannot read"),
        ] {
            std::fs::write(&p, bytes).unwrap();
            let e = read_idx(&p).unwrap_err().to_string();
            assert!(e.contains(why), "{e} (expected {why})");
        }
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_part_is_published_for_every_split_or_none_and_once() {
        let dir = tempfile::tempdir().unwrap();
        for prefix in ["train", "t10k"] {
            std::fs::write(
                dir.path().join(format!("{prefix}-images-idx3-ubyte")),
                idx(0x08, &[5, 2, 2], &[7; 20]),
            )
            .unwrap();
            std::fs::write(
                dir.path().join(format!("{prefix}-labels-idx1-ubyte")),
                idx(0x08, &[5], &[1, 2, 3, 4, 5]),
            )
            .unwrap();
        }
        let out = dir.path().join("out");
        let options = IdxOptions::new(Codec::Raw, 1);
        // Part 1 is there for the test split only (a writer that finished
        // it, or a racing one): the train split's part 1 was published
        // anyway, and every later run of part 1 failed on it.
        std::fs::create_dir_all(out.join("test/part-00001")).unwrap();
        // What a killed writer of part 1 left, and another part's staging.
        for stale in [
            ".part-00001.tmp-4242-0/train/image",
            "train/.part-00001.tmp-4242-1/image",
            "train/.part-00002.tmp-4242-2/image",
        ] {
            std::fs::create_dir_all(out.join(stale)).unwrap();
        }
        let e = convert_idx_part(dir.path(), &out, &options, 1, 3).unwrap_err();
        assert!(
            matches!(&e, Error::AlreadyExists { path } if path.ends_with("test/part-00001")),
            "{e}"
        );
        assert!(e.to_string().contains("a part is written once"), "{e}");
        assert_eq!(names(&out), ["test", "train"]);
        assert_eq!(names(&out.join("train")), [".part-00002.tmp-4242-2"]);
        assert_eq!(names(&out.join("test")), ["part-00001"]);
        // Removed, part 1 is written for both splits, once.
        std::fs::remove_dir(out.join("test/part-00001")).unwrap();
        let s = convert_idx_part(dir.path(), &out, &options, 1, 3).unwrap();
        assert_eq!(s.splits[0].records, 2);
        for split in ["train", "test"] {
            let part = out.join(split).join("part-00001");
            assert_eq!(names(&part), ["image", "label"]);
        }
        assert!(matches!(
            convert_idx_part(dir.path(), &out, &options, 1, 3),
            Err(Error::AlreadyExists { .. })
        ));
        assert_eq!(names(&out), ["test", "train"]);
        // A running writer of part 0 (its lock held): a second is refused.
        let held = PartLock::acquire(&out, "part-00000").unwrap();
        let e = convert_idx_part(dir.path(), &out, &options, 0, 3).unwrap_err();
        assert!(matches!(e, Error::PartBusy { .. }), "{e}");
        drop(held);
        convert_idx_part(dir.path(), &out, &options, 0, 3).unwrap();
        assert_eq!(names(&out), ["test", "train"]);
        assert_eq!(
            names(&out.join("train")),
            [".part-00002.tmp-4242-2", "part-00000", "part-00001"]
        );
    }

    #[test]
    fn zero_sized_items_are_an_error_not_a_panic() {
        // i16 images of 0 x 3 pixels: training a dictionary on their bytes
        // used to split the data into chunks of zero bytes (a panic).
        let dir = tempfile::tempdir().unwrap();
        for prefix in ["train", "t10k"] {
            std::fs::write(
                dir.path().join(format!("{prefix}-images-idx3-ubyte")),
                idx(0x0B, &[2, 0, 3], &[]),
            )
            .unwrap();
            std::fs::write(
                dir.path().join(format!("{prefix}-labels-idx1-ubyte")),
                idx(0x08, &[2], &[1, 2]),
            )
            .unwrap();
        }
        let out = dir.path().join("out");
        let outcome = std::panic::catch_unwind(|| {
            convert_idx_dir(dir.path(), &out, Codec::ZstdDict, 1).map(|_| ())
        });
        assert!(outcome.is_ok(), "convert_idx_dir panicked");
    }
}
