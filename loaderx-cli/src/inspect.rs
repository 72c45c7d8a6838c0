//! `loaderx info|digest|verify PATH`: what PATH is, and every store in it.
//!
//! PATH may be one store (a directory holding `meta.zr`), a split (a
//! directory of stores, `OUT/train` holding `image/` and `label/`), a
//! multi-part dataset (a directory holding `dataset.json`, one split
//! written by many writers and merged), or a conversion root (a directory
//! of splits, `OUT`). A URL is a store, or a multi-part dataset when no
//! store is there.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use loaderx_core::{ClassNames, Dataset, ErrorKind, Store, redact_url};

use crate::Error;

/// What a PATH holds.
enum Target {
    /// One store, open.
    Store(Box<Store>),
    /// A conversion root, a split or a dataset: its groups of stores.
    Tree {
        /// What PATH is, in words (`a conversion root of 2 splits`, ...).
        what: Kind,
        /// Its splits, in name order (one, PATH itself, unless a root).
        splits: Vec<Split>,
    },
}

/// The kind of a directory of stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A directory of splits.
    Root,
    /// A directory of stores.
    Split,
    /// A directory holding `dataset.json`.
    Dataset,
}

/// One split of a tree: its streams and class names.
struct Split {
    /// Its name, relative to PATH (`train`); empty for PATH itself.
    name: String,
    /// Its directory (or URL).
    dir: PathBuf,
    /// The number of parts, for a multi-part dataset.
    parts: Option<usize>,
    /// Its streams, in name order.
    streams: Vec<(String, Store)>,
    /// Its class names (none for a URL).
    classes: ClassNames,
}

impl Split {
    /// `name/stream`, or `stream` for PATH itself.
    fn label(&self, stream: &str) -> String {
        if self.name.is_empty() {
            stream.to_owned()
        } else {
            format!("{}/{stream}", self.name)
        }
    }
}

/// What every message about a directory loaderx cannot read says it expected.
const EXPECTED: &str = "a store holds meta.zr, a split holds stores (<split>/<stream>/meta.zr), \
     a conversion root holds splits (<root>/<split>/<stream>/meta.zr), a multi-part dataset \
     holds dataset.json";

/// True for a directory entry loaderx never reads as a split or stream
/// (a writer's staging, a lock, a sidecar file).
fn hidden(name: &str) -> bool {
    name.starts_with('.')
}

/// The visible subdirectories of `dir`, in name order.
fn subdirs(dir: &Path) -> Result<Vec<(String, PathBuf)>, Error> {
    let mut out = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if !hidden(&name) && path.is_dir() {
            out.push((name, path));
        }
    }
    out.sort();
    Ok(out)
}

/// The kind of the local directory `dir` as a split: a dataset, a
/// directory of stores, or neither (`None`).
fn split_kind(dir: &Path) -> Result<Option<Kind>, Error> {
    if Dataset::is_dataset_dir(dir) {
        return Ok(Some(Kind::Dataset));
    }
    let stores = subdirs(dir)?.iter().any(|(_, p)| Store::is_store_dir(p));
    Ok(stores.then_some(Kind::Split))
}

/// An error for `dir` when it holds parts (`part-<index>/<stream>/`)
/// without the manifest a merge writes.
fn unmerged_parts(dir: &Path) -> Result<Option<Error>, Error> {
    let parts: Vec<String> = subdirs(dir)?
        .into_iter()
        .filter(|(name, path)| {
            name.starts_with("part-")
                && subdirs(path).is_ok_and(|s| s.iter().any(|(_, p)| Store::is_store_dir(p)))
        })
        .map(|(name, _)| name)
        .collect();
    Ok(parts.first().map(|first| {
        format!(
            "{}: holds {} part(s) ({first}, ...) but no dataset.json: merge them first with \
             `loaderx dataset merge {}`",
            dir.display(),
            parts.len(),
            dir.display()
        )
        .into()
    }))
}

/// A split found under PATH: its name relative to PATH, its directory and kind.
type Found = (String, PathBuf, Kind);

/// Finds out what the local `path` is, without opening any store.
fn detect(path: &Path) -> Result<(Kind, Vec<Found>), Error> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!("{}: no such file or directory", path.display()).into());
        }
        Err(e) => return Err(format!("{}: {e}", path.display()).into()),
    };
    if !meta.is_dir() {
        return Err(format!("{}: not a directory ({EXPECTED})", path.display()).into());
    }
    if let Some(kind) = split_kind(path)? {
        return Ok((kind, vec![(String::new(), path.to_path_buf(), kind)]));
    }
    if let Some(e) = unmerged_parts(path)? {
        return Err(e);
    }
    let mut splits = Vec::new();
    for (name, dir) in subdirs(path)? {
        match split_kind(&dir)? {
            Some(kind) => splits.push((name, dir, kind)),
            None => {
                if let Some(e) = unmerged_parts(&dir)? {
                    return Err(e);
                }
            }
        }
    }
    if splits.is_empty() {
        return Err(format!(
            "{}: nothing loaderx reads is here ({EXPECTED})",
            path.display()
        )
        .into());
    }
    Ok((Kind::Root, splits))
}

/// Opens what `path` names: a store or a multi-part dataset at a URL
/// (the store first), any of the four kinds locally.
fn open(path: &Path) -> Result<Target, Error> {
    let text = path.to_string_lossy();
    if loaderx_core::is_url(&text) {
        return match Store::open(path) {
            Ok(store) => Ok(Target::Store(Box::new(store))),
            Err(e) if matches!(e.kind(), ErrorKind::NotAStore { .. }) => {
                // Not a store: a dataset's manifest, else the store's error.
                match Dataset::open(path) {
                    Ok(d) => Ok(Target::Tree {
                        what: Kind::Dataset,
                        splits: vec![dataset_split(String::new(), path, d, ClassNames::new())],
                    }),
                    Err(_) => Err(e.into()),
                }
            }
            Err(e) => Err(e.into()),
        };
    }
    if Store::is_store_dir(path) {
        return Ok(Target::Store(Box::new(Store::open(path)?)));
    }
    let (what, found) = detect(path)?;
    let mut splits = Vec::with_capacity(found.len());
    for (name, dir, kind) in found {
        let classes = ClassNames::read(&dir)?;
        splits.push(match kind {
            Kind::Dataset => dataset_split(name, &dir, Dataset::open(&dir)?, classes),
            Kind::Split | Kind::Root => Split {
                name,
                streams: Store::open_dir(&dir)?,
                dir,
                parts: None,
                classes,
            },
        });
    }
    Ok(Target::Tree { what, splits })
}

fn dataset_split(name: String, dir: &Path, d: Dataset, classes: ClassNames) -> Split {
    let parts = d.parts().len();
    Split {
        name,
        dir: dir.to_path_buf(),
        parts: Some(parts),
        streams: d.into_streams(),
        classes,
    }
}

/// How PATH is named in messages (a URL without its credentials).
fn shown(path: &Path) -> String {
    let text = path.display().to_string();
    if loaderx_core::is_url(&text) {
        redact_url(&text)
    } else {
        text
    }
}

/// The first line of every command's output about a tree.
fn headline(path: &Path, what: Kind, splits: &[Split]) -> String {
    let streams = |s: &Split| {
        s.streams
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let parts = |s: &Split| {
        s.parts
            .map(|p| format!(" in {p} part{}", if p == 1 { "" } else { "s" }))
            .unwrap_or_default()
    };
    let path = shown(path);
    match (what, splits) {
        (Kind::Root, _) => {
            let names: Vec<String> = splits
                .iter()
                .map(|s| match s.parts {
                    Some(p) => format!("{} ({p} parts)", s.name),
                    None => s.name.clone(),
                })
                .collect();
            format!(
                "{path}: a conversion root of {} split{}: {}",
                splits.len(),
                if splits.len() == 1 { "" } else { "s" },
                names.join(", ")
            )
        }
        (Kind::Dataset, [s]) => format!(
            "{path}: a multi-part dataset of {} records{}, streams {}",
            s.streams.first().map_or(0, |(_, st)| st.len()),
            parts(s),
            streams(s)
        ),
        (_, [s]) => format!(
            "{path}: a split of {} store{} ({})",
            s.streams.len(),
            if s.streams.len() == 1 { "" } else { "s" },
            streams(s)
        ),
        (_, _) => format!("{path}: {} splits", splits.len()),
    }
}

/// The streams of one split of PATH, for commands that read one split
/// (`loaderx profile`): a store alone is a split of one stream (named for
/// its directory); a tree of several splits needs `split` (default
/// `train`, when there is one). Returns how the split is named, and its
/// streams.
pub(crate) fn split_streams(
    path: &Path,
    split: Option<&str>,
) -> Result<(String, Vec<(String, Store)>), Error> {
    let splits = match open(path)? {
        Target::Store(store) => {
            let name = path
                .file_name()
                .map_or_else(|| "store".to_owned(), |n| n.to_string_lossy().into_owned());
            return Ok((shown(path), vec![(name, *store)]));
        }
        Target::Tree { splits, .. } => splits,
    };
    let names: Vec<String> = splits.iter().map(|s| s.name.clone()).collect();
    let want = match (split, splits.len()) {
        (Some(w), _) => w.to_owned(),
        (None, 1) => splits[0].name.clone(),
        (None, _) if names.iter().any(|n| n == "train") => "train".to_owned(),
        (None, _) => {
            return Err(format!(
                "{}: {} splits ({}); name one with --split",
                shown(path),
                names.len(),
                names.join(", ")
            )
            .into());
        }
    };
    let Some(found) = splits.into_iter().find(|s| s.name == want) else {
        return Err(format!(
            "{}: no split {want:?} (splits: {})",
            shown(path),
            names.join(", ")
        )
        .into());
    };
    let label = if found.name.is_empty() {
        shown(path)
    } else {
        format!("{}/{}", shown(path), found.name)
    };
    Ok((label, found.streams))
}

/// `loaderx info PATH`.
pub(crate) fn info(path: &Path) -> Result<String, Error> {
    let (what, splits) = match open(path)? {
        Target::Store(store) => return super::info(&store),
        Target::Tree { what, splits } => (what, splits),
    };
    let mut out = headline(path, what, &splits);
    out.push_str("\n\n");
    let header = [
        "stream", "kind", "records", "dtype", "shape", "codec", "payload", "raw", "ratio", "index",
    ];
    let mut rows: Vec<Vec<String>> = vec![header.iter().map(|h| (*h).to_owned()).collect()];
    let (mut total_payload, mut total_raw, mut total_index) = (0u64, 0u64, 0u64);
    for split in &splits {
        for (name, store) in &split.streams {
            let payload = store.payload_bytes();
            let index = store.stored_bytes().saturating_sub(payload);
            let raw = store.logical_bytes()?;
            total_payload = total_payload.saturating_add(payload);
            total_index = total_index.saturating_add(index);
            total_raw = total_raw.saturating_add(raw);
            rows.push(vec![
                split.label(name),
                store.kind().to_string(),
                store.len().to_string(),
                store.dtype().to_string(),
                shape(store),
                store.codec().to_string(),
                bytes(payload),
                bytes(raw),
                ratio(raw, payload),
                bytes(index),
            ]);
        }
    }
    let count = rows.len() - 1;
    if count > 1 {
        rows.push(vec![
            format!("total ({count} stores)"),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            bytes(total_payload),
            bytes(total_raw),
            ratio(total_raw, total_payload),
            bytes(total_index),
        ]);
    }
    out.push_str(&table(&rows, &[2, 6, 7, 8, 9]));
    out.push_str(
        "\npayload: the records as stored; ratio: raw / payload; index: meta.zr, the \
         format's 4 KiB header and 16 bytes a record whatever the codec (and a zstd_dict \
         dictionary)\n",
    );
    let mut class_lines = Vec::new();
    for split in &splits {
        for (stream, names) in split.classes.streams() {
            const SHOWN: usize = 5;
            let first: Vec<&str> = names.iter().take(SHOWN).map(String::as_str).collect();
            class_lines.push(format!(
                "  {}: {} class{}: {}{}",
                split.label(stream),
                names.len(),
                if names.len() == 1 { "" } else { "es" },
                first.join(", "),
                if names.len() > SHOWN { ", ..." } else { "" }
            ));
        }
    }
    if !class_lines.is_empty() {
        out.push_str("\nclass names (label 0 first, from classes.json):\n");
        out.push_str(&class_lines.join("\n"));
    }
    Ok(out.trim_end().to_owned())
}

/// `loaderx digest PATH`: a store's `<sha256-hex>  <length>`, or one line
/// `<sha256-hex>  <length>  <name>` per stream of a tree, names relative
/// to PATH (`train/image` for a root).
pub(crate) fn digest(path: &Path) -> Result<String, Error> {
    let splits = match open(path)? {
        Target::Store(store) => return Ok(loaderx_core::digest(&store)?.to_string()),
        Target::Tree { splits, .. } => splits,
    };
    let mut lines = Vec::new();
    for split in &splits {
        for (name, store) in &split.streams {
            lines.push(format!(
                "{}  {}",
                loaderx_core::digest(store)?,
                split.label(name)
            ));
        }
    }
    Ok(lines.join("\n"))
}

/// `loaderx verify PATH`: reads and decodes every record of every store;
/// checks each split's class names (the file parses, every part of a
/// dataset has the same names, every label is a name's index or -1).
pub(crate) fn verify(path: &Path) -> Result<String, Error> {
    let (what, splits) = match open(path)? {
        Target::Store(s) => {
            s.for_each_record(|_, _, _| Ok(()))?;
            return Ok(format!("ok: {} records verified", s.len()));
        }
        Target::Tree { what, splits } => (what, splits),
    };
    let mut lines = vec![headline(path, what, &splits)];
    let (mut stores, mut records) = (0usize, 0u64);
    for split in &splits {
        if let Some(parts) = split.parts
            && !split.classes.is_empty()
            && !loaderx_core::is_url(&split.dir.to_string_lossy())
        {
            same_classes_in_every_part(split)?;
            lines.push(format!(
                "  {}: the same class names in its {parts} parts",
                split.label(loaderx_core::CLASSES_FILE)
            ));
        }
        for (name, store) in &split.streams {
            let names = split.classes.get(name);
            let label = split.label(name);
            let mut labels = 0u64;
            store.for_each_record(|index, _, bytes| {
                let Some(names) = names else { return Ok(()) };
                for value in integers(store.dtype(), bytes) {
                    labels += 1;
                    let Some(value) = value else { continue };
                    if value != -1 && usize::try_from(value).map_or(true, |v| v >= names.len()) {
                        return Err(ErrorKind::CorruptRecord {
                            path: store.path().to_path_buf(),
                            index,
                            detail: format!(
                                "label {value} has no class name ({} names in classes.json)",
                                names.len()
                            ),
                        }
                        .into());
                    }
                }
                Ok(())
            })?;
            stores += 1;
            records += store.len();
            let mut line = format!("  {label}: {} records read and decoded", store.len());
            if let Some(names) = names {
                let _ = write!(
                    line,
                    "; {labels} labels checked against {} class names",
                    names.len()
                );
            }
            lines.push(line);
        }
    }
    lines.push(format!(
        "ok: {records} records in {stores} store{} verified",
        if stores == 1 { "" } else { "s" }
    ));
    Ok(lines.join("\n"))
}

/// Checks that every part of the dataset `split` holds the class names of
/// its first part (each part writer writes them).
fn same_classes_in_every_part(split: &Split) -> Result<(), Error> {
    let d = Dataset::open(&split.dir)?;
    for (part, _) in d.parts() {
        let dir = split.dir.join(part);
        let names = ClassNames::read(&dir)?;
        if names != split.classes {
            return Err(format!(
                "{}: its {} differs from the first part's; the parts were converted with \
                 other class names",
                dir.display(),
                loaderx_core::CLASSES_FILE
            )
            .into());
        }
    }
    Ok(())
}

/// The integer values of the element bytes `bytes` of type `dtype`; `None`
/// for each element of a type that holds no label, or one beyond `i64`.
fn integers(dtype: loaderx_core::DType, bytes: &[u8]) -> Vec<Option<i64>> {
    use loaderx_core::DType;
    let size = dtype.size();
    bytes
        .chunks_exact(size)
        .map(|b| {
            let mut le = [0u8; 8];
            le[..size.min(8)].copy_from_slice(&b[..size.min(8)]);
            let u = u64::from_le_bytes(le);
            let sign = |bits: u32| {
                let shift = 64 - bits;
                Some(((u << shift) as i64) >> shift)
            };
            match dtype {
                DType::U8 | DType::U16 | DType::U32 => Some(u as i64),
                DType::U64 => i64::try_from(u).ok(),
                DType::I8 => sign(8),
                DType::I16 => sign(16),
                DType::I32 => sign(32),
                DType::I64 => Some(u as i64),
                _ => None,
            }
        })
        .collect()
}

/// The record shape column: a Dense store's item shape (`scalar` for
/// none); a Ragged store's rank with each dimension's range (a rank-1
/// store's lengths from its location table; a higher rank's from up to
/// 16 records spread over the store).
fn shape(store: &Store) -> String {
    match store {
        Store::Dense(s) => {
            let shape = s.item_shape();
            if shape.is_empty() {
                "scalar".to_owned()
            } else {
                dims(shape.iter().map(|&d| (d, d)))
            }
        }
        Store::Ragged(s) => match s.ndim() {
            0 => "scalar".to_owned(),
            1 => match s.lengths() {
                Ok(l) if !l.is_empty() => {
                    let min = l.lengths().iter().copied().min().unwrap_or(0) as usize;
                    dims([(min, l.max() as usize)])
                }
                Ok(_) => "rank 1".to_owned(),
                Err(_) => "rank 1 (lengths unreadable)".to_owned(),
            },
            ndim => {
                const SAMPLED: u64 = 16;
                let n = s.len();
                let k = n.min(SAMPLED);
                let indices: Vec<u64> = (0..k).map(|i| i * n / k.max(1)).collect();
                match s.gather(&indices) {
                    Ok(batch) if k > 0 => {
                        let mut range = vec![(usize::MAX, 0usize); ndim];
                        for i in 0..batch.len() {
                            for (r, &d) in range.iter_mut().zip(batch.shape(i)) {
                                *r = (r.0.min(d), r.1.max(d));
                            }
                        }
                        let sampled = if k < n {
                            format!(" ({k} of {n} sampled)")
                        } else {
                            String::new()
                        };
                        format!("{}{sampled}", dims(range))
                    }
                    _ => format!("rank {ndim}"),
                }
            }
        },
    }
}

/// `[28, 28]`, or `[12..4096]` for a dimension whose length varies.
fn dims(ranges: impl IntoIterator<Item = (usize, usize)>) -> String {
    let parts: Vec<String> = ranges
        .into_iter()
        .map(|(lo, hi)| {
            if lo == hi {
                lo.to_string()
            } else {
                format!("{lo}..{hi}")
            }
        })
        .collect();
    format!("[{}]", parts.join(", "))
}

/// A byte count for people: `812 B`, `1.4 KiB`, `7.5 MiB`, `2.1 GiB`.
fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// Raw bytes over stored bytes: `3.56x`.
fn ratio(raw: u64, stored: u64) -> String {
    if stored == 0 {
        "-".to_owned()
    } else {
        format!("{:.2}x", raw as f64 / stored as f64)
    }
}

/// `rows` as columns two spaces apart, padded to their widest cell; the
/// columns `right` are right-aligned (numbers).
fn table(rows: &[Vec<String>], right: &[usize]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c > 0 {
                line.push_str("  ");
            }
            let pad = widths[c].saturating_sub(cell.chars().count());
            if right.contains(&c) {
                line.push_str(&" ".repeat(pad));
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.push_str(&" ".repeat(pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use loaderx_core::{Codec, DenseWriter, RaggedWriter};

    fn dense(path: &Path, labels: &[i64]) {
        let mut w = DenseWriter::<i64>::create(path, &[], Codec::Raw).unwrap();
        w.append_slice(labels, labels.len()).unwrap();
        w.close().unwrap();
    }

    fn ragged(path: &Path) {
        let mut w = RaggedWriter::<u8>::create(path, 1, Codec::Zstd).unwrap();
        w.append([vec![1u8, 2, 3], vec![4]]).unwrap();
        w.close().unwrap();
    }

    #[test]
    fn every_kind_of_directory_is_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("out");
        for split in ["train", "test"] {
            dense(&root.join(split).join("label"), &[0, 1]);
            ragged(&root.join(split).join("bytes"));
        }
        // A writer's staging and sidecar files are never splits or streams.
        std::fs::create_dir_all(root.join(".part-00001.staged/train")).unwrap();
        std::fs::write(root.join("train/classes.json"), "[\"a\", \"b\"]").unwrap();

        let (kind, splits) = detect(&root).unwrap();
        assert_eq!(kind, Kind::Root);
        let names: Vec<&str> = splits.iter().map(|(n, _, _)| n.as_str()).collect();
        assert_eq!(names, ["test", "train"]);
        let (kind, splits) = detect(&root.join("train")).unwrap();
        assert_eq!((kind, splits.len()), (Kind::Split, 1));
        assert!(matches!(
            open(&root.join("train/label")).unwrap(),
            Target::Store(_)
        ));

        // A dataset: parts merged; before the merge, a message saying so.
        let ds = dir.path().join("ds");
        for i in 0..2 {
            dense(&ds.join(Dataset::part_name(i)).join("label"), &[i as i64]);
        }
        let e = detect(&ds).unwrap_err().to_string();
        assert!(
            e.contains("no dataset.json") && e.contains("dataset merge"),
            "{e}"
        );
        Dataset::merge(&ds, Some(2)).unwrap();
        assert_eq!(detect(&ds).unwrap().0, Kind::Dataset);
        let Target::Tree { splits, .. } = open(&ds).unwrap() else {
            panic!("a dataset is a tree")
        };
        assert_eq!(splits[0].parts, Some(2));
        assert_eq!(splits[0].streams[0].1.len(), 2);

        // Missing, a file, and a directory of nothing loaderx reads.
        let e = detect(&dir.path().join("nope")).unwrap_err().to_string();
        assert!(e.ends_with("nope: no such file or directory"), "{e}");
        let file = dir.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        assert!(
            detect(&file)
                .unwrap_err()
                .to_string()
                .contains("not a directory")
        );
        let empty = dir.path().join("empty");
        std::fs::create_dir_all(empty.join("sub")).unwrap();
        let e = detect(&empty).unwrap_err().to_string();
        assert!(
            e.contains("nothing loaderx reads") && e.contains("meta.zr"),
            "{e}"
        );
    }

    #[test]
    fn verify_checks_labels_against_the_class_names() {
        let dir = tempfile::tempdir().unwrap();
        let split = dir.path().join("train");
        dense(&split.join("label"), &[0, 1, -1]);
        std::fs::write(split.join("classes.json"), r#"{"label": ["a", "b"]}"#).unwrap();
        let out = verify(&split).unwrap();
        assert!(
            out.contains("3 labels checked against 2 class names"),
            "{out}"
        );
        std::fs::write(split.join("classes.json"), r#"{"label": ["a"]}"#).unwrap();
        let e = verify(&split).unwrap_err().to_string();
        assert!(
            e.contains("record 1") && e.contains("label 1 has no class name"),
            "{e}"
        );
        std::fs::write(split.join("classes.json"), "{").unwrap();
        let e = verify(&split).unwrap_err().to_string();
        assert!(e.contains("classes.json:1:"), "{e}");
    }

    #[test]
    fn integers_of_every_label_type() {
        use loaderx_core::DType;
        assert_eq!(integers(DType::I8, &[0xff, 3]), [Some(-1), Some(3)]);
        assert_eq!(integers(DType::U16, &[1, 1]), [Some(257)]);
        assert_eq!(integers(DType::I32, &(-5i32).to_le_bytes()), [Some(-5)]);
        assert_eq!(integers(DType::U64, &u64::MAX.to_le_bytes()), [None]);
        assert_eq!(integers(DType::F32, &1f32.to_le_bytes()), [None]);
    }

    #[test]
    fn tables_align_and_sizes_read_well() {
        let rows = vec![
            vec!["a".to_owned(), "1".to_owned()],
            vec!["long".to_owned(), "100".to_owned()],
        ];
        assert_eq!(table(&rows, &[1]), "a       1\nlong  100\n");
        assert_eq!(bytes(812), "812 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(7 << 20), "7.0 MiB");
        assert_eq!(ratio(10, 4), "2.50x");
        assert_eq!(ratio(10, 0), "-");
        assert_eq!(dims([(28, 28), (3, 5)]), "[28, 3..5]");
    }
}
