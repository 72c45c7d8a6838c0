//! Finding a dataset's parquet files, configs and splits in a repo tree.
//!
//! Two layouts are recognised:
//!
//! - the Hub's parquet conversion (`refs/convert/parquet`):
//!   `<config>/<split>/0000.parquet`, `<config>/partial-<split>/0000.parquet`
//!   (a split the converter truncated);
//! - parquet shipped in the main tree: `data/<split>-00000-of-00002.parquet`,
//!   `<config>/<split>-*.parquet`, `data/<config>/<split>-*.parquet`,
//!   `<split>.parquet`, `data/<split>/*.parquet`.
//!
//! File names come from the remote repo: every component must be a plain
//! name (no `..`, separators or NUL), or the listing is refused.

use std::collections::BTreeMap;

use crate::output::safe_component;

/// The config name used when the layout names none.
pub(crate) const DEFAULT_CONFIG: &str = "default";

/// One split of one config: its parquet files in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SplitFiles {
    /// Split name (`train`, `test`, ...).
    pub(crate) split: String,
    /// True when the Hub's converter kept only part of the split.
    pub(crate) partial: bool,
    /// Repo-relative file names, sorted.
    pub(crate) files: Vec<String>,
}

/// Every config of a tree: config name to its splits (sorted by name).
pub(crate) type Layout = BTreeMap<String, BTreeMap<String, SplitFiles>>;

fn is_shard_number(stem: &str) -> bool {
    !stem.is_empty() && stem.bytes().all(|b| b.is_ascii_digit())
}

/// `train-00000-of-00002` or `train` gives `train`.
fn split_of_stem(stem: &str) -> &str {
    stem.split_once('-').map_or(stem, |(s, _)| s)
}

/// Parses one repo file name; `None` for files that are not parquet data.
fn classify(path: &str) -> Result<Option<(String, String, bool)>, String> {
    let Some(stem_path) = path.strip_suffix(".parquet") else {
        return Ok(None);
    };
    let comps: Vec<&str> = path.split('/').collect();
    for c in &comps {
        if safe_component("file", c).is_err() {
            if c.starts_with('.') && !c.contains(['\\', '\0']) && *c != "." && *c != ".." {
                // Hidden files and folders are not data.
                return Ok(None);
            }
            return Err(format!(
                "the repo lists the file {path:?}, whose name is not a plain relative path; refusing it"
            ));
        }
    }
    let stem = stem_path.rsplit('/').next().unwrap_or(stem_path);
    let dirs = &comps[..comps.len() - 1];
    let (config, split): (&str, &str) = match dirs {
        [] => (DEFAULT_CONFIG, split_of_stem(stem)),
        ["data"] => (DEFAULT_CONFIG, split_of_stem(stem)),
        ["data", split] if is_shard_number(stem) => (DEFAULT_CONFIG, split),
        ["data", config] => (config, split_of_stem(stem)),
        [config, split] if is_shard_number(stem) => (config, split),
        [config] => (config, split_of_stem(stem)),
        ["data", config, split] => (config, split),
        [config, split] => (config, split),
        _ => {
            return Err(format!(
                "cannot tell the config and split of {path:?} (too deeply nested)"
            ));
        }
    };
    let (split, partial) = match split.strip_prefix("partial-") {
        Some(s) => (s, true),
        None => (split, false),
    };
    for (kind, name) in [("config", config), ("split", split)] {
        safe_component(kind, name).map_err(|e| e.to_string())?;
    }
    Ok(Some((config.to_owned(), split.to_owned(), partial)))
}

/// Groups a repo's file names into configs and splits.
pub(crate) fn parse_layout<'a>(files: impl IntoIterator<Item = &'a str>) -> Result<Layout, String> {
    let mut layout = Layout::new();
    for path in files {
        let Some((config, split, partial)) = classify(path)? else {
            continue;
        };
        let entry = layout
            .entry(config)
            .or_default()
            .entry(split.clone())
            .or_insert_with(|| SplitFiles {
                split,
                partial,
                files: Vec::new(),
            });
        if entry.partial != partial {
            return Err(format!(
                "config {:?} holds both a complete and a partial split {:?}",
                path.split('/').next().unwrap_or_default(),
                entry.split
            ));
        }
        entry.files.push(path.to_owned());
    }
    for splits in layout.values_mut() {
        for s in splits.values_mut() {
            s.files.sort();
            s.files.dedup();
        }
    }
    Ok(layout)
}

/// Split names in the usual reading order: train, validation, test, then
/// the rest alphabetically.
pub(crate) fn ordered_splits(splits: &BTreeMap<String, SplitFiles>) -> Vec<&SplitFiles> {
    let rank = |name: &str| match name {
        "train" => 0,
        "validation" | "valid" | "dev" => 1,
        "test" => 2,
        _ => 3,
    };
    let mut out: Vec<&SplitFiles> = splits.values().collect();
    out.sort_by(|a, b| {
        rank(&a.split)
            .cmp(&rank(&b.split))
            .then(a.split.cmp(&b.split))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(layout: &Layout, config: &str, split: &str) -> Vec<String> {
        layout[config][split].files.clone()
    }

    #[test]
    fn parquet_conversion_branch() {
        let l = parse_layout([
            ".gitattributes",
            "mnist/train/0001.parquet",
            "mnist/train/0000.parquet",
            "mnist/test/0000.parquet",
            "big/partial-train/0000.parquet",
            "README.md",
        ])
        .unwrap();
        assert_eq!(l.keys().collect::<Vec<_>>(), ["big", "mnist"]);
        assert_eq!(
            files(&l, "mnist", "train"),
            ["mnist/train/0000.parquet", "mnist/train/0001.parquet"]
        );
        assert!(l["big"]["train"].partial);
        assert!(!l["mnist"]["test"].partial);
        let order: Vec<_> = ordered_splits(&l["mnist"])
            .iter()
            .map(|s| s.split.as_str())
            .collect();
        assert_eq!(order, ["train", "test"]);
    }

    #[test]
    fn main_tree_layouts() {
        let l = parse_layout([
            "data/train-00001-of-00002.parquet",
            "data/train-00000-of-00002.parquet",
            "data/test-00000-of-00001.parquet",
            "data/validation-00000-of-00001-5f1a.parquet",
        ])
        .unwrap();
        assert_eq!(
            files(&l, DEFAULT_CONFIG, "train"),
            [
                "data/train-00000-of-00002.parquet",
                "data/train-00001-of-00002.parquet"
            ]
        );
        let order: Vec<_> = ordered_splits(&l[DEFAULT_CONFIG])
            .iter()
            .map(|s| s.split.as_str())
            .collect();
        assert_eq!(order, ["train", "validation", "test"]);
        let l = parse_layout([
            "mnist/train-00000-of-00001.parquet",
            "mnist/test-00000-of-00001.parquet",
            "train.parquet",
            "data/extra/train-00000-of-00001.parquet",
            "data/train/0000.parquet",
        ])
        .unwrap();
        assert_eq!(
            files(&l, "mnist", "test"),
            ["mnist/test-00000-of-00001.parquet"]
        );
        assert_eq!(
            files(&l, DEFAULT_CONFIG, "train"),
            ["data/train/0000.parquet", "train.parquet"]
        );
        assert_eq!(
            files(&l, "extra", "train"),
            ["data/extra/train-00000-of-00001.parquet"]
        );
    }

    #[test]
    fn remote_names_cannot_escape() {
        for bad in [
            "../x.parquet",
            "a/../../x.parquet",
            "/abs/x.parquet",
            "a//x.parquet",
            "a\\..\\x.parquet",
            "cfg/../0000.parquet",
        ] {
            assert!(parse_layout([bad]).is_err(), "{bad}");
        }
        // Hidden files are skipped, not refused.
        assert!(parse_layout([".cache/x.parquet"]).unwrap().is_empty());
        // A split cannot be complete and partial at once.
        assert!(
            parse_layout(["c/train/0000.parquet", "c/partial-train/0000.parquet"])
                .unwrap_err()
                .contains("partial")
        );
        // Nothing parquet: empty.
        assert!(parse_layout(["README.md", "x.py"]).unwrap().is_empty());
    }
}
