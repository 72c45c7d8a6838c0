//! Image folders to Zrecord (feature `arrow`): `ROOT/<class>/<file>.png`,
//! the layout of torchvision's `ImageFolder` and burn's
//! `ImageFolderDataset`.
//!
//! [`convert_image_folder`] writes two stores per split:
//!
//! - `image`: the decoded pixels, Dense `u8 [H, W(, C)]` when every image
//!   of the split has one size and mode; the files' bytes, unchanged
//!   (Ragged `u8` rank 1), when the images have several sizes or with
//!   [`TableOptions::encoded_images`]; decoded Ragged pixels with
//!   [`TableOptions::decoded_images`] (the table layer's `Image` rule,
//!   [`crate::table`]). Images of one size but several modes are an error
//!   naming the first file of the second mode; [`TableOptions::image_mode`]
//!   converts every image to one mode;
//! - `label`: Dense `i64` scalars, the index of the image's class.
//!
//! # Layout
//!
//! Entries whose names start with `.` (`.DS_Store`, `.ipynb_checkpoints`)
//! are ignored everywhere. ROOT is read by one rule:
//!
//! - **splits**: when ROOT holds only directories, each of them holds
//!   only directories (at least one), and one of them has a usual split
//!   name (`train`, `val`, `valid`, `validation`, `dev`, `test`), each
//!   directory of ROOT is a split
//!   (`ROOT/train/<class>/...`, `ROOT/test/<class>/...`) and the
//!   directories inside it are classes (splits in the order train,
//!   validation, test, then the others by name);
//! - **classes**: otherwise ROOT is one split, named by
//!   [`ImageFolder::split_name`] (default `train`), and its directories
//!   are classes. A file directly in ROOT is then an error.
//!
//! A class directory holds image files (`.jpg`, `.jpeg`, `.png`, `.webp`,
//! any case)
//! at any depth; any other file is an error naming it (nothing is skipped
//! silently). A symbolic link anywhere under ROOT is an error naming it:
//! links are never followed, and never skipped.
//!
//! # Labels
//!
//! The classes are the class directory names of the whole ROOT (of every
//! split), sorted by their UTF-8 bytes (Python's `sorted`, as torchvision
//! does); a class's label is its index in that list. So every split, and
//! every part writer ([`TableOptions::part`]), labels alike, even when a
//! split lacks a class. The list is written beside the stores, as
//! [`CLASSES_FILE`] in every split's directory (a part's, for a part
//! writer): `{"label": ["cat", "dog"]}` means label 0 is `cat`
//! ([`loaderx_core::classes`] reads it back).
//!
//! # Order
//!
//! The records of a split are its image files sorted by path, component by
//! component (so by class, then by path inside the class directory): the
//! same on every machine, whatever order the file system lists them in.
//!
//! # Errors
//!
//! A file that is not a PNG, JPEG or WebP image, or cannot be decoded, is an
//! error naming the file (and its row); the conversion leaves nothing
//! behind.
//!
//! ```no_run
//! use loaderx_convert::folder::{ImageFolder, convert_image_folder};
//! use loaderx_convert::table::TableOptions;
//!
//! let source = ImageFolder::new("photos/").options(TableOptions::new().encoded_images(true));
//! let summary = convert_image_folder(&source, "stores")?;
//! println!("{summary}");
//! # Ok::<(), loaderx_convert::Error>(())
//! ```

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{LargeBinaryBuilder, StringBuilder};
use arrow_array::{ArrayRef, Int64Array, RecordBatch, RecordBatchOptions, StructArray};
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef};
use serde_json::{Value, json};

use crate::error::Error;
use crate::table::{
    Scan, Sizing, SplitTables, TableOptions, TableSource, TableSummary, convert_tables,
};

/// The file beside every split's stores holding the class names in label
/// order: a JSON object mapping the label store's name to its names
/// ([`loaderx_core::ClassNames`]).
pub const CLASSES_FILE: &str = loaderx_core::CLASSES_FILE;

/// The name of the image store.
pub const IMAGE_COLUMN: &str = "image";

/// The name of the label store.
pub const LABEL_COLUMN: &str = "label";

/// The file extensions of images, lowercase.
const IMAGE_EXTENSIONS: [&str; 4] = ["jpg", "jpeg", "png", "webp"];

/// An image folder to convert and the table options; a builder.
#[derive(Debug, Clone)]
pub struct ImageFolder {
    root: PathBuf,
    split: String,
    options: TableOptions,
}

impl ImageFolder {
    /// Converts the image folder `root` with the default [`TableOptions`].
    pub fn new(root: impl Into<PathBuf>) -> ImageFolder {
        ImageFolder {
            root: root.into(),
            split: "train".to_owned(),
            options: TableOptions::new(),
        }
    }

    /// The split's name when ROOT's directories are classes (default
    /// `train`); see the [module documentation](self).
    pub fn split_name(mut self, name: impl Into<String>) -> ImageFolder {
        self.split = name.into();
        self
    }

    /// How the images convert (decoded or encoded, image mode, codec,
    /// parts...).
    pub fn options(mut self, options: TableOptions) -> ImageFolder {
        self.options = options;
        self
    }

    /// The folder's class names, in label order (from every split).
    ///
    /// # Errors
    ///
    /// As [`convert_image_folder`] for the folder's layout.
    pub fn classes(&self) -> Result<Vec<String>, Error> {
        Ok(discover(&self.root, &self.split)?.classes)
    }
}

/// One image file of a split.
#[derive(Debug, Clone)]
struct ImageFile {
    path: PathBuf,
    label: i64,
    size: u64,
}

/// A folder's splits (in order) and its classes.
#[derive(Debug)]
struct Layout {
    classes: Vec<String>,
    splits: Vec<(String, Vec<ImageFile>)>,
}

fn source_error(path: &Path, detail: impl Into<String>) -> Error {
    Error::Source {
        file: path.display().to_string(),
        detail: detail.into(),
    }
}

/// The entries of `dir` that do not start with `.`, sorted by name, with
/// whether each is a directory; a symbolic link (hidden or not) is an
/// error naming it.
fn entries(dir: &Path) -> Result<Vec<(PathBuf, bool, u64)>, Error> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let path = entry.path();
        let meta = std::fs::symlink_metadata(&path).map_err(|e| Error::io(&path, e))?;
        if meta.file_type().is_symlink() {
            return Err(source_error(
                &path,
                "is a symbolic link; an image folder's links are never followed \
                 (replace it with the file or directory it points to)",
            ));
        }
        if entry.file_name().as_encoded_bytes().starts_with(b".") {
            continue;
        }
        if !meta.is_dir() && !meta.is_file() {
            return Err(source_error(
                &path,
                "is neither a file nor a directory (a socket, a device or a FIFO)",
            ));
        }
        out.push((path, meta.is_dir(), meta.len()));
    }
    out.sort();
    Ok(out)
}

/// The name of directory `path`, which must be UTF-8.
fn dir_name(path: &Path, what: &str) -> Result<String, Error> {
    path.file_name()
        .and_then(OsStr::to_str)
        .map(str::to_owned)
        .ok_or_else(|| source_error(path, format!("a {what} directory's name must be UTF-8")))
}

fn is_image(path: &Path) -> bool {
    path.extension()
        .and_then(OsStr::to_str)
        .is_some_and(|e| IMAGE_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

/// The image files under class directory `dir`, at any depth.
fn class_files(dir: &Path, out: &mut Vec<(PathBuf, u64)>) -> Result<(), Error> {
    for (path, is_dir, size) in entries(dir)? {
        if is_dir {
            class_files(&path, out)?;
        } else if is_image(&path) {
            out.push((path, size));
        } else {
            return Err(source_error(
                &path,
                "is not an image file (.jpg, .jpeg, .png or .webp); an image folder's class \
                 directories hold only images (names starting with `.` are ignored)",
            ));
        }
    }
    Ok(())
}

/// True when every entry of `dir` is a directory, and there is one.
fn only_dirs(entries: &[(PathBuf, bool, u64)]) -> bool {
    !entries.is_empty() && entries.iter().all(|(_, is_dir, _)| *is_dir)
}

/// Reads the layout of `root` (see the module documentation).
fn discover(root: &Path, default_split: &str) -> Result<Layout, Error> {
    let meta = std::fs::metadata(root).map_err(|e| Error::io(root, e))?;
    if !meta.is_dir() {
        return Err(source_error(root, "is not a directory"));
    }
    let top = entries(root)?;
    let mut splits_of = Vec::new();
    // A class directory may hold only directories too (images at any
    // depth): the split layout also needs a usual split name.
    let known = |dir: &PathBuf| {
        dir.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
            matches!(
                n.to_ascii_lowercase().as_str(),
                "train" | "val" | "valid" | "validation" | "dev" | "test"
            )
        })
    };
    let mut is_split_layout = only_dirs(&top) && top.iter().any(|(dir, _, _)| known(dir));
    if is_split_layout {
        for (dir, _, _) in &top {
            let inner = entries(dir)?;
            if !only_dirs(&inner) {
                is_split_layout = false;
                break;
            }
            splits_of.push((dir.clone(), inner));
        }
    }
    // (split, its class directories)
    let splits: Vec<(String, Vec<PathBuf>)> = if is_split_layout {
        splits_of
            .into_iter()
            .map(|(dir, inner)| {
                let name = dir_name(&dir, "split")?;
                crate::output::safe_component("split", &name)?;
                Ok((name, inner.into_iter().map(|(p, _, _)| p).collect()))
            })
            .collect::<Result<_, Error>>()?
    } else {
        crate::output::safe_component("split", default_split)?;
        let mut classes = Vec::new();
        for (path, is_dir, _) in top {
            if !is_dir {
                return Err(source_error(
                    &path,
                    "is a file directly in the image folder's root; images belong in class \
                     directories (ROOT/<class>/<file>.png)",
                ));
            }
            classes.push(path);
        }
        vec![(default_split.to_owned(), classes)]
    };
    let mut names = BTreeSet::new();
    for (_, dirs) in &splits {
        for d in dirs {
            names.insert(dir_name(d, "class")?);
        }
    }
    if names.is_empty() {
        return Err(source_error(
            root,
            "holds no class directories (an image folder is ROOT/<class>/<file>.png)",
        ));
    }
    let classes: Vec<String> = names.into_iter().collect();
    let mut out = Vec::with_capacity(splits.len());
    for (name, dirs) in splits {
        let mut files = Vec::new();
        for d in &dirs {
            let class = dir_name(d, "class")?;
            let label = classes.iter().position(|c| *c == class).unwrap_or(0) as i64;
            let mut found = Vec::new();
            class_files(d, &mut found)?;
            files.extend(
                found
                    .into_iter()
                    .map(|(path, size)| ImageFile { path, label, size }),
            );
        }
        if files.is_empty() {
            return Err(source_error(
                root,
                format!("split {name:?} holds no image files (.jpg, .jpeg, .png, .webp)"),
            ));
        }
        // Component by component, as the directories were walked.
        files.sort_by(|a, b| a.path.cmp(&b.path));
        out.push((name, files));
    }
    // The usual order: train, validation, test, then the rest by name.
    let rank = |name: &str| match name {
        "train" => 0,
        "validation" | "valid" | "val" | "dev" => 1,
        "test" => 2,
        _ => 3,
    };
    out.sort_by(|a, b| rank(&a.0).cmp(&rank(&b.0)).then(a.0.cmp(&b.0)));
    Ok(Layout {
        classes,
        splits: out,
    })
}

/// The `{bytes, path}` struct fields of an image column.
fn image_fields() -> Fields {
    Fields::from(vec![
        Field::new("bytes", DataType::LargeBinary, false),
        Field::new("path", DataType::Utf8, false),
    ])
}

/// Reads image file `path` (a symbolic link is refused), checking that it
/// holds a PNG, JPEG or WebP image; errors name the file (`shown`).
pub(crate) fn read_image_file(path: &Path, shown: &str) -> Result<Vec<u8>, Error> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| Error::io(path, e))?;
    if meta.file_type().is_symlink() {
        return Err(Error::Source {
            file: shown.to_owned(),
            detail: "is a symbolic link; an image folder's links are never followed".to_owned(),
        });
    }
    if meta.len() > loaderx_core::MAX_RECORD_LEN {
        return Err(Error::Source {
            file: shown.to_owned(),
            detail: format!(
                "is {} bytes, more than a record may hold ({} bytes)",
                meta.len(),
                loaderx_core::MAX_RECORD_LEN
            ),
        });
    }
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    check_image_bytes(&bytes).map_err(|detail| Error::Source {
        file: shown.to_owned(),
        detail,
    })?;
    Ok(bytes)
}

/// Checks that `bytes` start like a PNG, JPEG or WebP image.
pub(crate) fn check_image_bytes(bytes: &[u8]) -> Result<(), String> {
    if bytes.is_empty() {
        return Err("is empty, not a PNG, JPEG or WebP image".to_owned());
    }
    match image::guess_format(bytes) {
        Ok(image::ImageFormat::Png | image::ImageFormat::Jpeg | image::ImageFormat::WebP) => Ok(()),
        Ok(f) => Err(format!(
            "is a {f:?} image; only PNG, JPEG and WebP images convert"
        )),
        Err(_) => {
            Err("is not a PNG, JPEG or WebP image (its first bytes are none of theirs)".to_owned())
        }
    }
}

/// One split of an image folder as a table: `image` and `label`.
struct FolderTable {
    label: String,
    schema: SchemaRef,
    features: Value,
    files: Vec<ImageFile>,
}

impl FolderTable {
    fn new(split: &str, root: &Path, classes: &[String], files: Vec<ImageFile>) -> FolderTable {
        let schema = Arc::new(Schema::new(vec![
            Field::new(IMAGE_COLUMN, DataType::Struct(image_fields()), false),
            Field::new(LABEL_COLUMN, DataType::Int64, false),
        ]));
        FolderTable {
            label: format!("{} split {split:?}", root.display()),
            schema,
            features: json!({
                IMAGE_COLUMN: {"_type": "Image"},
                LABEL_COLUMN: {"_type": "ClassLabel", "names": classes},
            }),
            files,
        }
    }

    /// The batch of files `files` with the columns `columns`.
    fn batch(&self, columns: &[usize], files: &[ImageFile]) -> Result<RecordBatch, Error> {
        let schema = Arc::new(
            self.schema
                .project(columns)
                .map_err(|e| Error::invalid(format!("{}: {e}", self.label)))?,
        );
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(columns.len());
        for &c in columns {
            match c {
                0 => {
                    use rayon::prelude::*;
                    let read: Vec<Result<Vec<u8>, Error>> = files
                        .par_iter()
                        .map(|f| read_image_file(&f.path, &f.path.display().to_string()))
                        .collect();
                    let mut bytes = LargeBinaryBuilder::new();
                    let mut paths = StringBuilder::new();
                    for (f, r) in files.iter().zip(read) {
                        bytes.append_value(r?);
                        paths.append_value(f.path.to_string_lossy());
                    }
                    let parts: Vec<ArrayRef> =
                        vec![Arc::new(bytes.finish()), Arc::new(paths.finish())];
                    arrays.push(Arc::new(
                        StructArray::try_new(image_fields(), parts, None)
                            .map_err(|e| Error::invalid(format!("{}: {e}", self.label)))?,
                    ));
                }
                _ => arrays.push(Arc::new(Int64Array::from_iter_values(
                    files.iter().map(|f| f.label),
                ))),
            }
        }
        RecordBatch::try_new_with_options(
            schema,
            arrays,
            &RecordBatchOptions::new().with_row_count(Some(files.len())),
        )
        .map_err(|e| Error::invalid(format!("{}: {e}", self.label)))
    }
}

/// Cuts `rows` rows of `weights` (from `at` on) into batches of at most
/// `sizing.max_rows` rows and about `sizing.target_bytes` bytes (each
/// weight plus `sizing.extra_row_bytes`), at least one row each: the end of
/// the batch starting at `at`.
pub(crate) fn batch_end(weights: &[u64], at: usize, end: usize, sizing: Sizing) -> usize {
    let mut bytes = 0u64;
    let mut k = at;
    while k < end && k - at < sizing.max_rows.max(1) {
        let w = weights[k].saturating_add(sizing.extra_row_bytes as u64);
        if k > at && bytes.saturating_add(w) > sizing.target_bytes as u64 {
            break;
        }
        bytes = bytes.saturating_add(w);
        k += 1;
    }
    k
}

impl TableSource for FolderTable {
    fn label(&self) -> &str {
        &self.label
    }

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn features(&self) -> Result<Option<Value>, String> {
        Ok(Some(self.features.clone()))
    }

    fn rows(&self) -> u64 {
        self.files.len() as u64
    }

    fn scan<'a>(
        &'a self,
        columns: &'a [usize],
        rows: Option<(usize, usize)>,
        sizing: Sizing,
    ) -> Scan<'a> {
        let (first, count) = rows.unwrap_or((0, self.files.len()));
        let end = first.saturating_add(count).min(self.files.len());
        let reads_images = columns.contains(&0);
        let weights: Vec<u64> = self.files[..end]
            .iter()
            .map(|f| if reads_images { f.size } else { 8 })
            .collect();
        let mut at = first.min(end);
        Box::new(std::iter::from_fn(move || {
            if at >= end {
                return None;
            }
            let to = batch_end(&weights, at, end, sizing);
            let batch = self.batch(columns, &self.files[at..to]);
            at = if batch.is_ok() { to } else { end };
            Some(batch)
        }))
    }
}

/// Converts the image folder of `source` (see the [module
/// documentation](self)) to stores under `out`: `out/<split>/image/` and
/// `out/<split>/label/` beside `out/<split>/classes.json`, or a part of
/// each split with [`TableOptions::part`] (`out/<split>/part-<index>/`).
///
/// # Errors
///
/// [`Error::AlreadyExists`] when `out` exists (for a whole conversion);
/// [`Error::Io`] for a file or directory that cannot be read;
/// [`Error::Source`] naming the path of a symbolic link, a file that is not
/// an image or not in a class directory, a split without images; an image
/// that does not decode is an [`Error::Column`] naming its row and file;
/// [`Error::InvalidOption`] and [`Error::Store`] as the table layer reports
/// them. A failed conversion leaves nothing at `out`.
pub fn convert_image_folder(
    source: &ImageFolder,
    out: impl AsRef<Path>,
) -> Result<TableSummary, Error> {
    source.options.check()?;
    let layout = discover(&source.root, &source.split)?;
    let names: Vec<String> = layout.splits.iter().map(|(name, _)| name.clone()).collect();
    let all: Vec<PathBuf> = layout
        .splits
        .iter()
        .flat_map(|(_, files)| files.iter().map(|f| f.path.clone()))
        .collect();
    let open = || {
        let mut splits = Vec::with_capacity(layout.splits.len());
        for (name, files) in layout.splits {
            let table = FolderTable::new(&name, &source.root, &layout.classes, files);
            splits.push(SplitTables {
                name,
                partial: false,
                tables: vec![Box::new(table) as Box<dyn TableSource>],
            });
        }
        Ok(splits)
    };
    // The label column's `ClassLabel` feature holds the class names: the
    // table layer writes them as CLASSES_FILE.
    convert_tables(
        &names,
        open,
        out.as_ref(),
        &source.options,
        &format!("image folder {}", source.root.display()),
        all,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(w: u32, h: u32, seed: u8) -> Vec<u8> {
        let pixels: Vec<u8> = (0..w * h * 3)
            .map(|i| (i as u8).wrapping_mul(seed))
            .collect();
        crate::table::images::tests::png(image::ExtendedColorType::Rgb8, w, h, &pixels)
    }

    fn write(path: &Path, bytes: &[u8]) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn classes_layout_sorts_classes_and_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("in");
        write(&root.join("dog/b.png"), &png(2, 3, 1));
        write(&root.join("dog/a.PNG"), &png(2, 3, 2));
        write(&root.join("cat/z/x.png"), &png(2, 3, 3));
        write(&root.join("cat/y.png"), &png(2, 3, 4));
        write(&root.join(".hidden/ignored.txt"), b"x");
        let layout = discover(&root, "all").unwrap();
        assert_eq!(layout.classes, ["cat", "dog"]);
        assert_eq!(layout.splits.len(), 1);
        let (name, files) = &layout.splits[0];
        assert_eq!(name, "all");
        let got: Vec<(String, i64)> = files
            .iter()
            .map(|f| {
                let rel = f.path.strip_prefix(&root).unwrap();
                (rel.display().to_string(), f.label)
            })
            .collect();
        assert_eq!(
            got,
            [
                ("cat/y.png".to_owned(), 0),
                ("cat/z/x.png".to_owned(), 0),
                ("dog/a.PNG".to_owned(), 1),
                ("dog/b.png".to_owned(), 1)
            ]
        );
    }

    #[test]
    fn split_layout_labels_from_every_split() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("in");
        write(&root.join("train/cat/a.png"), &png(2, 2, 1));
        write(&root.join("train/dog/a.png"), &png(2, 2, 2));
        write(&root.join("test/emu/a.png"), &png(2, 2, 3));
        write(&root.join("test/dog/b.png"), &png(2, 2, 4));
        let layout = discover(&root, "train").unwrap();
        assert_eq!(layout.classes, ["cat", "dog", "emu"]);
        let splits: Vec<(&str, Vec<i64>)> = layout
            .splits
            .iter()
            .map(|(n, f)| (n.as_str(), f.iter().map(|f| f.label).collect()))
            .collect();
        assert_eq!(splits, [("train", vec![0, 1]), ("test", vec![1, 2])]);
    }

    #[test]
    fn symlinks_and_stray_files_are_errors_naming_them() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("in");
        write(&root.join("cat/a.png"), &png(2, 2, 1));
        write(&root.join("cat/notes.txt"), b"hello");
        let e = discover(&root, "train").unwrap_err().to_string();
        assert!(
            e.contains("cat/notes.txt") && e.contains("not an image file"),
            "{e}"
        );
        std::fs::remove_file(root.join("cat/notes.txt")).unwrap();
        std::os::unix::fs::symlink(root.join("cat/a.png"), root.join("cat/.b.png")).unwrap();
        let e = discover(&root, "train").unwrap_err().to_string();
        assert!(
            e.contains("cat/.b.png") && e.contains("symbolic link"),
            "{e}"
        );
        std::fs::remove_file(root.join("cat/.b.png")).unwrap();
        write(&root.join("README.txt"), b"x");
        let e = discover(&root, "train").unwrap_err().to_string();
        assert!(
            e.contains("README.txt") && e.contains("class directories"),
            "{e}"
        );
    }

    #[test]
    fn converts_and_parts_read_only_their_rows() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("in");
        for k in 0..5u8 {
            write(&root.join(format!("c{}/{k}.png", k % 2)), &png(3, 2, k + 1));
        }
        let out = dir.path().join("out");
        let summary = convert_image_folder(&ImageFolder::new(&root), &out).unwrap();
        assert_eq!(summary.splits[0].records, 5);
        let text = std::fs::read_to_string(out.join("train").join(CLASSES_FILE)).unwrap();
        let classes: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(classes, json!({"label": ["c0", "c1"]}));
        let read = loaderx_core::classes(out.join("train")).unwrap();
        assert_eq!(read.name("label", 1), Some("c1"));
        let labels = loaderx_core::Store::open(out.join("train/label")).unwrap();
        assert_eq!(labels.len(), 5);
        let images = loaderx_core::Store::open(out.join("train/image")).unwrap();
        assert_eq!(images.kind(), loaderx_core::StoreKind::Dense);

        let parts = dir.path().join("parts");
        for i in 0..2 {
            let source = ImageFolder::new(&root).options(TableOptions::new().part(i, 2));
            convert_image_folder(&source, &parts).unwrap();
            assert!(
                parts
                    .join(format!("train/part-{i:05}"))
                    .join(CLASSES_FILE)
                    .is_file()
            );
        }
        let merged = loaderx_core::Dataset::merge(parts.join("train"), Some(2)).unwrap();
        assert_eq!(merged.len(), 5);
        for (name, store) in merged.streams() {
            let single = loaderx_core::Store::open(out.join("train").join(name)).unwrap();
            assert_eq!(
                loaderx_core::digest(store).unwrap(),
                loaderx_core::digest(&single).unwrap(),
                "{name}"
            );
        }
    }

    #[test]
    fn a_file_that_is_not_an_image_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("in");
        write(&root.join("c/a.png"), &png(2, 2, 1));
        write(&root.join("c/b.jpg"), b"this is not a jpeg");
        let e = convert_image_folder(&ImageFolder::new(&root), dir.path().join("out"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("c/b.jpg") && e.contains("not a PNG, JPEG or WebP"),
            "{e}"
        );
        assert!(!dir.path().join("out").exists());
    }

    #[test]
    fn batches_are_bounded() {
        let sizing = Sizing {
            target_bytes: 10,
            extra_row_bytes: 0,
            max_rows: 3,
        };
        let w = [4, 4, 4, 20, 1, 1, 1, 1];
        assert_eq!(batch_end(&w, 0, 8, sizing), 2);
        assert_eq!(batch_end(&w, 2, 8, sizing), 3);
        assert_eq!(batch_end(&w, 3, 8, sizing), 4);
        assert_eq!(batch_end(&w, 4, 8, sizing), 7);
        assert_eq!(batch_end(&w, 7, 8, sizing), 8);
    }
}
