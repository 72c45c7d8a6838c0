//! Building a converter's output root atomically.

use std::fs;
use std::path::{Component, Path, PathBuf};

use crate::error::Error;

/// A converter output under construction: a hidden sibling directory of the
/// final root, renamed into place by [`StagedRoot::publish`]. Dropping it
/// unpublished removes it.
#[derive(Debug)]
pub struct StagedRoot {
    temp: PathBuf,
    target: PathBuf,
    published: bool,
}

/// Checks that a name taken from source data (split, config, column) is one
/// plain path component: not empty, `.` or `..`, without separators, NUL or
/// a leading dot, so it can never escape the output root.
pub fn safe_component(kind: &'static str, name: &str) -> Result<(), Error> {
    let mut components = Path::new(name).components();
    let plain =
        matches!(components.next(), Some(Component::Normal(_))) && components.next().is_none();
    if !plain || name.contains(['/', '\\', '\0']) || name.starts_with('.') {
        return Err(Error::UnsafeName {
            kind,
            name: name.to_owned(),
        });
    }
    Ok(())
}

impl StagedRoot {
    /// Starts building `target`, which must not exist yet.
    pub fn new(target: impl AsRef<Path>) -> Result<StagedRoot, Error> {
        let target = target.as_ref().to_path_buf();
        if fs::symlink_metadata(&target).is_ok() {
            return Err(Error::AlreadyExists { path: target });
        }
        let name = target
            .file_name()
            .ok_or_else(|| Error::invalid(format!("{} has no final name", target.display())))?
            .to_string_lossy()
            .into_owned();
        let parent = target
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        let temp = parent.join(format!(".{name}.tmp-{}", std::process::id()));
        if fs::symlink_metadata(&temp).is_ok() {
            fs::remove_dir_all(&temp).map_err(|e| Error::io(&temp, e))?;
        }
        fs::create_dir(&temp).map_err(|e| Error::io(&temp, e))?;
        Ok(StagedRoot {
            temp,
            target,
            published: false,
        })
    }

    /// Where store `split/column` is built (both names checked with [`safe_component`]).
    pub fn store_path(&self, split: &str, column: &str) -> Result<PathBuf, Error> {
        safe_component("split", split)?;
        safe_component("column", column)?;
        Ok(self.temp.join(split).join(column))
    }

    /// The temporary directory.
    pub fn temp_path(&self) -> &Path {
        &self.temp
    }

    /// Renames the finished root into place.
    pub fn publish(mut self) -> Result<PathBuf, Error> {
        if fs::symlink_metadata(&self.target).is_ok() {
            return Err(Error::AlreadyExists {
                path: self.target.clone(),
            });
        }
        fs::rename(&self.temp, &self.target).map_err(|e| Error::io(&self.target, e))?;
        self.published = true;
        Ok(self.target.clone())
    }
}

impl Drop for StagedRoot {
    fn drop(&mut self) {
        if !self.published {
            let _ = fs::remove_dir_all(&self.temp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cannot_escape() {
        for bad in ["", ".", "..", "a/b", "/abs", "a\\b", ".hidden", "x\0y"] {
            assert!(safe_component("split", bad).is_err(), "{bad:?}");
        }
        for good in ["train", "image", "test-2", "label_0"] {
            assert!(safe_component("split", good).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn unpublished_roots_vanish() {
        let dir = tempfile::tempdir().unwrap();
        let root = StagedRoot::new(dir.path().join("out")).unwrap();
        let temp = root.temp_path().to_path_buf();
        std::fs::create_dir_all(root.store_path("train", "x").unwrap()).unwrap();
        assert!(temp.exists());
        drop(root);
        assert!(!temp.exists());
        assert!(!dir.path().join("out").exists());
        let root = StagedRoot::new(dir.path().join("out")).unwrap();
        assert_eq!(root.publish().unwrap(), dir.path().join("out"));
        assert!(StagedRoot::new(dir.path().join("out")).is_err());
    }
}
