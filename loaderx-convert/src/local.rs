//! Local Parquet files, Arrow IPC files and streams, and
//! `datasets.Dataset.save_to_disk` directories to Zrecord (feature `arrow`).
//!
//! [`convert_parquet`] and [`convert_arrow`] (and
//! [`convert_jsonl`](crate::jsonl::convert_jsonl), for `.jsonl`, `.ndjson`
//! and `.json` files) take a [`LocalSource`]: files and directories, sorted
//! into splits by these rules, in this order:
//!
//! 1. `split_glob(NAME, GLOB)` (`--split-glob NAME=GLOB`, repeatable): the split
//!    `NAME` holds the files `GLOB` matches (sorted; `*` stays within one
//!    directory, `**` crosses them); the paths given are then not used;
//! 2. a file given: the split [`LocalSource::split_name`] (default `train`);
//! 3. a `save_to_disk` directory (Arrow only): a `Dataset`'s (`state.json`
//!    lists its data files in order) is the split `split_name`; a
//!    `DatasetDict`'s (`dataset_dict.json`) has one split per entry, each
//!    a `Dataset` directory. Its `dataset_info.json` `features` give
//!    `Image`, `Audio` and `ClassLabel` columns their meaning, as the Hub's
//!    `huggingface` schema metadata does;
//! 4. any other directory: each subdirectory is a split of its name,
//!    holding the matching files under it (recursively, sorted); a file
//!    directly inside is in the split its name starts with when it is named
//!    like the Hub's shards (`train-00000-of-00004.parquet` is `train`),
//!    else in `split_name`; a subdirectory `data` is laid out by these same
//!    rules, so a dataset repo downloaded from the Hub
//!    (`data/train-00000-of-00002.parquet`, ...) converts as `convert hf`
//!    converts it.
//!
//! The same split from several inputs concatenates in the order given. A
//! symbolic link to a file is followed; one to a directory inside a walked
//! directory is refused (name its target instead). Every column rule, the
//! parts, and the errors are the table layer's ([`crate::table`]).
//!
//! ```no_run
//! use loaderx_convert::local::{LocalSource, convert_parquet};
//! use loaderx_convert::table::TableOptions;
//!
//! let source = LocalSource::new(["data/"]).options(TableOptions::new());
//! let summary = convert_parquet(&source, "stores")?;
//! println!("{summary}");
//! # Ok::<(), loaderx_convert::Error>(())
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use globset::GlobBuilder;
use serde_json::Value;

use crate::error::Error;
use crate::ipc::IpcTable;
use crate::parquet_file::file::ParquetFile;
use crate::table::{SplitTables, TableOptions, TableSource, TableSummary, convert_tables};

/// Files and directories to convert, how they form splits, and the table
/// options; a builder.
#[derive(Debug, Clone)]
pub struct LocalSource {
    paths: Vec<PathBuf>,
    globs: Vec<(String, String)>,
    split: String,
    options: TableOptions,
}

impl LocalSource {
    /// Converts `paths` (files and directories) with the default
    /// [`TableOptions`].
    pub fn new<I, P>(paths: I) -> LocalSource
    where
        I: IntoIterator<Item = P>,
        P: Into<PathBuf>,
    {
        LocalSource {
            paths: paths.into_iter().map(Into::into).collect(),
            globs: Vec::new(),
            split: "train".to_owned(),
            options: TableOptions::new(),
        }
    }

    /// The split `name` holds the files `glob` matches (see the
    /// [module documentation](self)); repeatable.
    pub fn split_glob(mut self, name: impl Into<String>, glob: impl Into<String>) -> LocalSource {
        self.globs.push((name.into(), glob.into()));
        self
    }

    /// The split of files given by name and of unnamed files (default
    /// `train`).
    pub fn split_name(mut self, name: impl Into<String>) -> LocalSource {
        self.split = name.into();
        self
    }

    /// How the tables convert (columns, strings, images, codec, parts...).
    pub fn options(mut self, options: TableOptions) -> LocalSource {
        self.options = options;
        self
    }

    /// The table options.
    pub(crate) fn table_options(&self) -> &TableOptions {
        &self.options
    }
}

/// What kind of tables a conversion reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Parquet,
    Arrow,
    /// JSON Lines (`crate::jsonl`).
    Jsonl,
    /// CSV and TSV, plain or gzipped (`crate::csv`).
    Csv,
    /// WebDataset tar shards (`crate::webdataset`): `.tar`, `.tar.gz` and
    /// `.tgz`, exactly.
    Tar,
}

impl Kind {
    /// The `loaderx convert` command that reads files of this kind.
    fn command(self) -> &'static str {
        match self {
            Kind::Parquet => "parquet",
            Kind::Arrow => "arrow",
            Kind::Jsonl => "jsonl",
            Kind::Csv => "csv",
            Kind::Tar => "webdataset",
        }
    }

    /// A file given to a converter of `self` whose name says it is of
    /// another kind: an error naming it and the converter that reads it.
    pub(crate) fn refuse_other(self, path: &Path) -> Result<(), Error> {
        if self.matches(path) {
            return Ok(());
        }
        let other = [
            Kind::Csv,
            Kind::Jsonl,
            Kind::Parquet,
            Kind::Arrow,
            Kind::Tar,
        ]
        .into_iter()
        .find(|k| *k != self && k.matches(path));
        match other {
            Some(k) => Err(invalid(
                path,
                format!(
                    "{} file, not read by `convert {}`: use \"loaderx convert {}\"",
                    match k {
                        Kind::Csv => "a CSV",
                        Kind::Jsonl => "a JSON Lines",
                        Kind::Parquet => "a Parquet",
                        Kind::Arrow => "an Arrow IPC",
                        Kind::Tar => "a tar",
                    },
                    self.command(),
                    k.command()
                ),
            )),
            None => Ok(()),
        }
    }

    fn matches(self, path: &Path) -> bool {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match self {
            Kind::Parquet => ext.as_deref() == Some("parquet"),
            Kind::Arrow => matches!(ext.as_deref(), Some("arrow" | "arrows" | "feather" | "ipc")),
            Kind::Jsonl => matches!(ext.as_deref(), Some("jsonl" | "ndjson" | "json")),
            Kind::Csv => path.file_name().is_some_and(|n| {
                let n = n.to_string_lossy().to_ascii_lowercase();
                [".csv", ".tsv", ".csv.gz", ".tsv.gz"]
                    .iter()
                    .any(|e| n.len() > e.len() && n.ends_with(e))
            }),
            Kind::Tar => path.file_name().is_some_and(|n| {
                let n = n.as_encoded_bytes();
                [".tar", ".tar.gz", ".tgz"]
                    .iter()
                    .any(|e| n.len() > e.len() && n.ends_with(e.as_bytes()))
            }),
        }
    }
}

/// One split's files, and the `features` they share (a `save_to_disk`
/// directory's).
#[derive(Debug, Default)]
struct SplitFiles {
    files: Vec<PathBuf>,
    features: Option<Value>,
}

type Splits = BTreeMap<String, SplitFiles>;

fn add(splits: &mut Splits, split: &str, files: Vec<PathBuf>, features: Option<Value>) {
    let entry = splits.entry(split.to_owned()).or_default();
    entry.files.extend(files);
    if features.is_some() {
        entry.features = features;
    }
}

fn invalid(path: &Path, detail: impl Into<String>) -> Error {
    Error::Source {
        file: path.display().to_string(),
        detail: detail.into(),
    }
}

fn read_json(path: &Path) -> Result<Value, Error> {
    let size = std::fs::metadata(path)
        .map_err(|e| Error::io(path, e))?
        .len();
    if size > 64 << 20 {
        return Err(invalid(
            path,
            "larger than 64 MiB; not a dataset description",
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    if bytes.len() > 64 << 20 {
        return Err(invalid(
            path,
            "larger than 64 MiB; not a dataset description",
        ));
    }
    serde_json::from_slice(&bytes).map_err(|e| invalid(path, format!("not valid JSON: {e}")))
}

/// A plain file name from a `save_to_disk` description (no separators, no
/// `..`), joined to `dir`.
fn data_file(dir: &Path, name: &str, description: &Path) -> Result<PathBuf, Error> {
    crate::output::safe_component("data file", name).map_err(|_| {
        invalid(
            description,
            format!("names the data file {name:?}, not a plain file name"),
        )
    })?;
    Ok(dir.join(name))
}

/// A `save_to_disk` `Dataset` directory's data files and features.
fn saved_dataset(dir: &Path) -> Result<SplitFiles, Error> {
    let state_path = dir.join("state.json");
    let state = read_json(&state_path)?;
    let listed = state
        .get("_data_files")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid(&state_path, "has no _data_files list"))?;
    let mut files = Vec::with_capacity(listed.len());
    for f in listed {
        let name = f
            .get("filename")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid(&state_path, "a _data_files entry has no filename"))?;
        files.push(data_file(dir, name, &state_path)?);
    }
    let info_path = dir.join("dataset_info.json");
    let features = if info_path.exists() {
        read_json(&info_path)?.get("features").cloned()
    } else {
        None
    };
    Ok(SplitFiles { files, features })
}

/// The split a file directly inside a directory belongs to.
fn split_of_file(path: &Path, default: &str) -> String {
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    // `<split>-00000-of-00004`, or with the fingerprint older
    // `push_to_hub` releases appended: `<split>-00000-of-00004-1c9e4b6e`.
    for parts in [5, 4] {
        let found: Vec<&str> = stem.rsplitn(parts, '-').collect();
        let (fingerprint, rest) = match found.as_slice() {
            [hex, rest @ ..] if parts == 5 => (Some(*hex), rest),
            all => (None, all),
        };
        if let [total, "of", index, split] = rest
            && !split.is_empty()
            && digits(total)
            && digits(index)
            && fingerprint.is_none_or(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            return (*split).to_owned();
        }
    }
    default.to_owned()
}

/// The files of `kind` under `dir`, recursively, sorted; a symbolic link to
/// a directory is an error, one to a file is followed.
pub(crate) fn walk(dir: &Path, kind: Kind, out: &mut Vec<PathBuf>) -> Result<(), Error> {
    walk_to(dir, kind, usize::MAX, out)
}

/// [`walk`], at most `depth` directories down (`1`: `dir`'s own files).
fn walk_to(dir: &Path, kind: Kind, depth: usize, out: &mut Vec<PathBuf>) -> Result<(), Error> {
    if depth == 0 {
        return Ok(());
    }
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        entries.push(entry.path());
    }
    entries.sort();
    for path in entries {
        let link = std::fs::symlink_metadata(&path).map_err(|e| Error::io(&path, e))?;
        let meta = std::fs::metadata(&path).map_err(|e| Error::io(&path, e))?;
        if meta.is_dir() {
            if link.file_type().is_symlink() {
                return Err(invalid(
                    &path,
                    "is a symbolic link to a directory; pass its target as an input instead",
                ));
            }
            walk_to(&path, kind, depth - 1, out)?;
        } else if meta.is_file() && kind.matches(&path) {
            out.push(path);
        }
    }
    Ok(())
}

/// The files `pattern` matches, sorted.
pub(crate) fn expand_glob(pattern: &str, kind: Kind) -> Result<Vec<PathBuf>, Error> {
    let glob = GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map_err(|e| {
            let what = if kind == Kind::Tar {
                "shard"
            } else {
                "--split-glob"
            };
            Error::invalid(format!("{what} glob {pattern:?}: {e}"))
        })?
        .compile_matcher();
    // The directory before the first component with a glob character, and
    // how many components the pattern has below it (a walk goes no deeper,
    // unless `**` may cross any number of directories).
    let mut base = PathBuf::new();
    let components: Vec<_> = Path::new(pattern).components().collect();
    let mut below = 0;
    for (k, component) in components.iter().enumerate() {
        let text = component.as_os_str().to_string_lossy();
        if text.contains(['*', '?', '[', '{']) {
            below = components.len() - k;
            break;
        }
        base.push(component);
    }
    let depth = if pattern.contains("**") {
        usize::MAX
    } else {
        below
    };
    if base.as_os_str().is_empty() {
        base.push(".");
    }
    if base.is_file() {
        return Ok(vec![base]);
    }
    let mut all = Vec::new();
    walk_to(&base, kind, depth, &mut all)?;
    let relative = !Path::new(pattern).is_absolute() && !pattern.starts_with("./");
    Ok(all
        .into_iter()
        .filter(|p| {
            let shown = if relative {
                p.strip_prefix(".").unwrap_or(p)
            } else {
                p.as_path()
            };
            glob.is_match(shown)
        })
        .collect())
}

/// Sorts the files of the plain directory `dir` into `splits`: each
/// subdirectory is a split of its name (all matching files under it), a
/// file directly inside is in the split its Hub-style name says, else in
/// `default`; at the top, a subdirectory `data` is laid out by these same
/// rules (the Hub's `data/<split>-00000-of-00001.parquet`).
fn layout_dir(
    dir: &Path,
    kind: Kind,
    default: &str,
    top: bool,
    splits: &mut Splits,
) -> Result<(), Error> {
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        entries.push(entry.map_err(|e| Error::io(dir, e))?.path());
    }
    entries.sort();
    for entry in entries {
        let link = std::fs::symlink_metadata(&entry).map_err(|e| Error::io(&entry, e))?;
        let meta = std::fs::metadata(&entry).map_err(|e| Error::io(&entry, e))?;
        if meta.is_dir() {
            if link.file_type().is_symlink() {
                return Err(invalid(
                    &entry,
                    "is a symbolic link to a directory; pass its target as an input instead",
                ));
            }
            let name = entry
                .file_name()
                .and_then(|n| n.to_str())
                .filter(|n| !n.starts_with('.'))
                .map(str::to_owned);
            let Some(name) = name else { continue };
            if top && name == "data" {
                layout_dir(&entry, kind, default, false, splits)?;
                continue;
            }
            let mut files = Vec::new();
            walk(&entry, kind, &mut files)?;
            if !files.is_empty() {
                add(splits, &name, files, None);
            }
        } else if meta.is_file() && kind.matches(&entry) {
            let split = split_of_file(&entry, default);
            add(splits, &split, vec![entry], None);
        }
    }
    Ok(())
}

/// Sorts the inputs of `source` into splits.
fn discover(source: &LocalSource, kind: Kind) -> Result<Splits, Error> {
    let mut splits = Splits::new();
    if !source.globs.is_empty() {
        for (name, pattern) in &source.globs {
            let files = expand_glob(pattern, kind)?;
            if files.is_empty() {
                return Err(Error::invalid(format!(
                    "--split-glob {name}={pattern}: no file matches"
                )));
            }
            for f in &files {
                if let Some((other, _)) = splits.iter().find(|(_, s)| s.files.contains(f)) {
                    return Err(invalid(
                        f,
                        format!("matches the globs of two splits, {other} and {name}"),
                    ));
                }
            }
            add(&mut splits, name, files, None);
        }
        return Ok(splits);
    }
    if source.paths.is_empty() {
        return Err(Error::invalid("no input files or directories given"));
    }
    for path in &source.paths {
        let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
        if meta.is_file() {
            kind.refuse_other(path)?;
            add(&mut splits, &source.split, vec![path.clone()], None);
            continue;
        }
        if kind == Kind::Arrow && path.join("dataset_dict.json").is_file() {
            let dict_path = path.join("dataset_dict.json");
            let dict = read_json(&dict_path)?;
            let names = dict
                .get("splits")
                .and_then(Value::as_array)
                .ok_or_else(|| invalid(&dict_path, "has no splits list"))?;
            for name in names {
                let name = name
                    .as_str()
                    .ok_or_else(|| invalid(&dict_path, "a split name is not a string"))?;
                let dir = data_file(path, name, &dict_path)?;
                let saved = saved_dataset(&dir)?;
                add(&mut splits, name, saved.files, saved.features);
            }
            continue;
        }
        if kind == Kind::Arrow && path.join("state.json").is_file() {
            let saved = saved_dataset(path)?;
            add(&mut splits, &source.split, saved.files, saved.features);
            continue;
        }
        layout_dir(path, kind, &source.split, true, &mut splits)?;
    }
    if splits.values().all(|s| s.files.is_empty()) {
        return Err(Error::invalid(format!(
            "no {} files under {}",
            match kind {
                Kind::Parquet => "parquet (.parquet)",
                Kind::Arrow => "Arrow IPC (.arrow, .arrows, .feather, .ipc)",
                Kind::Jsonl => "JSON Lines (.jsonl, .ndjson, .json)",
                Kind::Csv => "CSV (.csv, .tsv, .csv.gz, .tsv.gz)",
                Kind::Tar => "tar (.tar)",
            },
            source
                .paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(splits)
}

/// Split names in the usual order: train, validation, test, then the rest
/// alphabetically.
fn ordered(splits: Splits) -> Vec<(String, SplitFiles)> {
    let rank = |name: &str| match name {
        "train" => 0,
        "validation" | "valid" | "dev" => 1,
        "test" => 2,
        _ => 3,
    };
    let mut out: Vec<(String, SplitFiles)> = splits.into_iter().collect();
    out.sort_by(|a, b| rank(&a.0).cmp(&rank(&b.0)).then(a.0.cmp(&b.0)));
    out
}

/// The splits of `source` for tables of `kind` (files only, no
/// `save_to_disk` features), in order, each with its files in order.
pub(crate) fn local_splits(
    source: &LocalSource,
    kind: Kind,
) -> Result<Vec<(String, Vec<PathBuf>)>, Error> {
    let mut out = Vec::new();
    for (name, split) in ordered(discover(source, kind)?) {
        crate::output::safe_component("split", &name)?;
        out.push((name, split.files));
    }
    Ok(out)
}

fn convert_local(source: &LocalSource, out: &Path, kind: Kind) -> Result<TableSummary, Error> {
    source.options.check()?;
    let splits = ordered(discover(source, kind)?);
    let names: Vec<String> = splits.iter().map(|(name, _)| name.clone()).collect();
    let files: Vec<PathBuf> = splits
        .iter()
        .flat_map(|(_, s)| s.files.iter().cloned())
        .collect();
    let open = || {
        let mut tables = Vec::with_capacity(splits.len());
        for (name, split) in &splits {
            let mut opened: Vec<Box<dyn TableSource>> = Vec::with_capacity(split.files.len());
            for path in &split.files {
                let label = path.display().to_string();
                opened.push(match kind {
                    Kind::Parquet => Box::new(ParquetFile::open(path, &label)?),
                    Kind::Arrow => Box::new(
                        IpcTable::open(path, &label)?.with_features(split.features.clone()),
                    ),
                    Kind::Jsonl => {
                        return Err(Error::invalid("JSON Lines files convert with jsonl"));
                    }
                    Kind::Csv => {
                        return Err(Error::invalid("CSV files convert with csv"));
                    }
                    Kind::Tar => {
                        return Err(Error::invalid("tar shards convert with webdataset"));
                    }
                });
            }
            tables.push(SplitTables {
                name: name.clone(),
                partial: false,
                tables: opened,
            });
        }
        Ok(tables)
    };
    convert_tables(&names, open, out, &source.options, "local", files)
}

/// Converts local parquet files (see the [module documentation](self)) to
/// stores under `out`: `out/<split>/<store>/`, or a part of each split
/// with [`TableOptions::part`].
///
/// # Errors
///
/// [`Error::AlreadyExists`] when `out` exists (for a whole conversion);
/// [`Error::Io`] for an input that cannot be read; [`Error::Source`] for a
/// file that is not readable parquet or whose columns differ from its
/// split's first file; [`Error::UnknownColumn`], [`Error::Column`] and
/// [`Error::InvalidOption`] as the table layer reports them; [`Error::Store`]
/// from writing. A failed conversion leaves nothing at `out`.
pub fn convert_parquet(source: &LocalSource, out: impl AsRef<Path>) -> Result<TableSummary, Error> {
    convert_local(source, out.as_ref(), Kind::Parquet)
}

/// Converts local Arrow IPC files and streams and `save_to_disk`
/// directories (see the [module documentation](self)) to stores under
/// `out`, as [`convert_parquet`] does.
///
/// # Errors
///
/// As [`convert_parquet`], for Arrow IPC inputs.
pub fn convert_arrow(source: &LocalSource, out: impl AsRef<Path>) -> Result<TableSummary, Error> {
    convert_local(source, out.as_ref(), Kind::Arrow)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hub_shard_names_give_their_split() {
        assert_eq!(
            split_of_file(Path::new("d/test-00000-of-00002.parquet"), "train"),
            "test"
        );
        assert_eq!(
            split_of_file(Path::new("d/my-split-00001-of-00002.parquet"), "train"),
            "my-split"
        );
        assert_eq!(split_of_file(Path::new("d/data.parquet"), "train"), "train");
        assert_eq!(split_of_file(Path::new("d/x-1-of-.parquet"), "all"), "all");
        assert_eq!(
            split_of_file(Path::new("d/test-00000-of-00001-1c9e4b6e.parquet"), "train"),
            "test"
        );
        assert_eq!(
            split_of_file(Path::new("d/validation-00002-of-00003-0f.parquet"), "train"),
            "validation"
        );
        assert_eq!(
            split_of_file(Path::new("d/test-00000-of-00001-xyz.parquet"), "train"),
            "train"
        );
    }
}
