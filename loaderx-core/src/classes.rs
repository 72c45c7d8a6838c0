//! Class names beside a split's stores: which name each label value of a
//! labelled stream stands for.
//!
//! Every converter that knows the names (an image folder's class
//! directories, a `ClassLabel` column of Parquet, Arrow or Hub data, a
//! `save_to_disk` directory's features) writes them into the split's
//! directory (a part's, for a part writer) as [`CLASSES_FILE`], a JSON
//! object mapping each labelled stream to its names in label order:
//!
//! ```text
//! OUT/train/
//!   classes.json          {"label": ["cat", "dog"]}   label 0 is "cat"
//!   image/  label/
//! ```
//!
//! The older form, a bare JSON array of names (written by `convert images`
//! before), is read as the names of the stream `label`.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::dataset::{Dataset, MANIFEST_FILE};
use crate::error::{Error, ErrorKind};

/// The file beside a split's stores holding its class names.
pub const CLASSES_FILE: &str = "classes.json";

/// The label stream an old-form file (a bare array of names) names.
pub const DEFAULT_LABEL_STREAM: &str = "label";

/// The largest class-name file read (a million long names fit in it).
const MAX_CLASSES_LEN: u64 = 256 << 20;

/// The class names of a split's labelled streams, each stream's names in
/// label order (label `i` is `names[i]`); streams in name order.
///
/// ```
/// use loaderx_core::{CLASSES_FILE, ClassNames};
///
/// let split = tempfile::tempdir()?;
/// std::fs::write(split.path().join(CLASSES_FILE), r#"{"label": ["cat", "dog"]}"#)?;
/// let classes = loaderx_core::classes(split.path())?;
/// assert_eq!(classes.get("label"), Some(&["cat".to_owned(), "dog".to_owned()][..]));
/// assert_eq!(classes.name("label", 1), Some("dog"));
/// assert_eq!(classes.name("label", 2), None);
/// assert_eq!(classes.get("image"), None);
///
/// // A split without the file has no class names.
/// let other = tempfile::tempdir()?;
/// assert!(ClassNames::read(other.path())?.is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClassNames {
    streams: BTreeMap<String, Vec<String>>,
}

/// The class names of the split at `split_dir`: [`ClassNames::read`].
///
/// # Errors
///
/// As [`ClassNames::read`].
pub fn classes(split_dir: impl AsRef<Path>) -> Result<ClassNames, Error> {
    ClassNames::read(split_dir)
}

impl ClassNames {
    /// No class names.
    pub fn new() -> ClassNames {
        ClassNames::default()
    }

    /// Reads the class names of the split directory `split_dir`: its
    /// [`CLASSES_FILE`]; for a multi-part dataset directory (one holding
    /// [`MANIFEST_FILE`] and no class file of its own), its first part's,
    /// which every part shares (each part writer writes the same names).
    /// A split without the file has none (an empty `ClassNames`).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Io`] when `split_dir` is not a directory that can be
    /// read, or the file cannot be read; [`ErrorKind::ClassNames`] naming
    /// the file (and the line and column where the JSON breaks) when it is
    /// not a JSON object mapping stream names to arrays of strings, nor a
    /// bare array of strings.
    pub fn read(split_dir: impl AsRef<Path>) -> Result<ClassNames, Error> {
        let dir = split_dir.as_ref();
        let meta = std::fs::metadata(dir).map_err(|e| Error::io(dir, e))?;
        if !meta.is_dir() {
            return Err(Error::io(
                dir,
                std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory"),
            ));
        }
        let mut path = dir.join(CLASSES_FILE);
        if !path.exists() && dir.join(MANIFEST_FILE).is_file() {
            path = dir.join(Dataset::part_name(0)).join(CLASSES_FILE);
        }
        if !path.exists() {
            return Ok(ClassNames::new());
        }
        let file = std::fs::File::open(&path).map_err(|e| Error::io(&path, e))?;
        let mut bytes = Vec::new();
        file.take(MAX_CLASSES_LEN + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| Error::io(&path, e))?;
        if bytes.len() as u64 > MAX_CLASSES_LEN {
            return Err(malformed(
                &path,
                None,
                format!("larger than {MAX_CLASSES_LEN} bytes"),
            ));
        }
        ClassNames::from_json(&bytes, &path)
    }

    /// Parses the contents of a class-name file; `path` names it in errors.
    ///
    /// ```
    /// use loaderx_core::ClassNames;
    ///
    /// let old = ClassNames::from_json(br#"["cat", "dog"]"#, "classes.json")?;
    /// assert_eq!(old.name("label", 0), Some("cat"));
    /// let e = ClassNames::from_json(br#"{"label": [1, 2]}"#, "x/classes.json").unwrap_err();
    /// assert!(e.to_string().starts_with("x/classes.json: "), "{e}");
    /// # Ok::<(), loaderx_core::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`ErrorKind::ClassNames`] as [`read`](Self::read) says.
    pub fn from_json(bytes: &[u8], path: impl AsRef<Path>) -> Result<ClassNames, Error> {
        let path = path.as_ref();
        let value: Value = serde_json::from_slice(bytes).map_err(|e| {
            let at = (e.line() > 0).then(|| (e.line(), e.column()));
            malformed(path, at, format!("not JSON: {e}"))
        })?;
        let mut out = ClassNames::new();
        match value {
            Value::Array(names) => {
                out.streams.insert(
                    DEFAULT_LABEL_STREAM.to_owned(),
                    strings(path, "the array", names)?,
                );
            }
            Value::Object(map) => {
                for (stream, names) in map {
                    let Value::Array(names) = names else {
                        return Err(malformed(
                            path,
                            None,
                            format!("stream {stream:?}: expected an array of class names"),
                        ));
                    };
                    let names = strings(path, &format!("stream {stream:?}"), names)?;
                    out.streams.insert(stream, names);
                }
            }
            _ => {
                return Err(malformed(
                    path,
                    None,
                    "expected an object mapping each labelled stream to its class names \
                     (or an array of the names of the stream \"label\")",
                ));
            }
        }
        Ok(out)
    }

    /// The file's contents for these names: a JSON object, streams in name
    /// order, with a final newline.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(&self.streams)
            .unwrap_or_else(|_| unreachable!("strings always serialize"));
        text.push('\n');
        text
    }

    /// Sets the names of `stream`, replacing any it had.
    pub fn insert(&mut self, stream: impl Into<String>, names: Vec<String>) {
        self.streams.insert(stream.into(), names);
    }

    /// The names of `stream` in label order, if it has names.
    pub fn get(&self, stream: &str) -> Option<&[String]> {
        self.streams.get(stream).map(Vec::as_slice)
    }

    /// The name of label `label` of `stream`: `None` when the stream has
    /// no names or the label is negative (`datasets`' -1, no label) or
    /// past its last name.
    pub fn name(&self, stream: &str, label: i64) -> Option<&str> {
        let i = usize::try_from(label).ok()?;
        self.get(stream)?.get(i).map(String::as_str)
    }

    /// The label of the class `name` of `stream`, if it is one of its names.
    pub fn label(&self, stream: &str, name: &str) -> Option<usize> {
        self.get(stream)?.iter().position(|n| n == name)
    }

    /// Every labelled stream and its names, streams in name order.
    pub fn streams(&self) -> impl ExactSizeIterator<Item = (&str, &[String])> + '_ {
        self.streams
            .iter()
            .map(|(s, names)| (s.as_str(), names.as_slice()))
    }

    /// The number of labelled streams.
    pub fn len(&self) -> usize {
        self.streams.len()
    }

    /// True when no stream has names.
    pub fn is_empty(&self) -> bool {
        self.streams.is_empty()
    }
}

/// The strings of `values`, or an error naming `what`'s first non-string.
fn strings(path: &Path, what: &str, values: Vec<Value>) -> Result<Vec<String>, Error> {
    values
        .into_iter()
        .enumerate()
        .map(|(i, v)| match v {
            Value::String(s) => Ok(s),
            other => Err(malformed(
                path,
                None,
                format!("{what}: name {i} is {other}, not a string"),
            )),
        })
        .collect()
}

fn malformed(path: &Path, at: Option<(usize, usize)>, detail: impl Into<String>) -> Error {
    ErrorKind::ClassNames {
        path: PathBuf::from(path),
        line: at.map(|(l, _)| l),
        column: at.map(|(_, c)| c),
        detail: detail.into(),
    }
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn both_forms_read_and_the_new_one_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(CLASSES_FILE), "[\"cat\", \"dog\"]\n").unwrap();
        let old = ClassNames::read(dir.path()).unwrap();
        assert_eq!(old.get("label"), Some(&names(&["cat", "dog"])[..]));
        assert_eq!(old.label("label", "dog"), Some(1));
        assert_eq!(old.name("label", -1), None);

        let mut new = ClassNames::new();
        new.insert("fine", names(&["a", "b", "c"]));
        new.insert("coarse", names(&["x"]));
        let text = new.to_json();
        std::fs::write(dir.path().join(CLASSES_FILE), &text).unwrap();
        let back = classes(dir.path()).unwrap();
        assert_eq!(back, new);
        let order: Vec<&str> = back.streams().map(|(s, _)| s).collect();
        assert_eq!(order, ["coarse", "fine"]);
        assert_eq!(back.name("fine", 2), Some("c"));
        assert_eq!(back.len(), 2);
    }

    #[test]
    fn a_dataset_directory_reads_its_first_parts_names() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(MANIFEST_FILE), "{}").unwrap();
        let part = dir.path().join(Dataset::part_name(0));
        std::fs::create_dir(&part).unwrap();
        std::fs::write(part.join(CLASSES_FILE), r#"{"y": ["no", "yes"]}"#).unwrap();
        assert_eq!(classes(dir.path()).unwrap().name("y", 1), Some("yes"));
    }

    #[test]
    fn malformed_files_are_errors_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(CLASSES_FILE);
        for (text, expect) in [
            ("{\"label\": [\"a\",\n  }", ":2:"),
            ("{\"label\": [\"a\", 3]}", "name 1 is 3"),
            ("{\"label\": \"a\"}", "expected an array"),
            ("42", "expected an object"),
            ("[null]", "name 0 is null"),
        ] {
            std::fs::write(&file, text).unwrap();
            let e = classes(dir.path()).unwrap_err();
            assert!(matches!(e.kind(), ErrorKind::ClassNames { .. }), "{e:?}");
            assert_eq!(e.path(), Some(file.as_path()));
            let m = e.to_string();
            assert!(m.starts_with(&file.display().to_string()), "{m}");
            assert!(m.contains(expect), "{text}: {m}");
        }
        // No directory at all is an I/O error, never "no names".
        let e = classes(dir.path().join("missing")).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Io { .. }), "{e}");
        let e = classes(&file).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Io { .. }), "{e}");
    }
}
