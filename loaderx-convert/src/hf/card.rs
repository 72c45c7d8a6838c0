//! Configs declared in a dataset card: the `configs:` block of the YAML
//! header of `README.md`, as the Hub and `datasets` read it.
//!
//! ```yaml
//! ---
//! configs:
//! - config_name: main
//!   default: true
//!   data_files:
//!   - split: train
//!     path: "weird/dir/train-*.parquet"
//!   - split: test
//!     path: [other/eval.parquet]
//! - config_name: extra
//!   data_files: "extra/**/*.parquet"
//! ---
//! ```
//!
//! `data_files` is a pattern or a list of patterns (all of split `train`),
//! a list of `{split, path}` entries (`path` a pattern or a list), or a
//! mapping from split to patterns. Patterns are relative to the repo root:
//! `*` and `?` match within one path component, `**` any number of
//! components, `[...]` one character of a set. The default config is the
//! one with `default: true`, else the one named `default`, else the only one.

use std::collections::BTreeMap;

use globset::{GlobBuilder, GlobMatcher};
use yaml_serde::Value;

use super::layout::{Layout, SplitFiles};
use crate::output::safe_component;

/// The split of patterns given without one.
const DEFAULT_SPLIT: &str = "train";

/// Split names and their path patterns, in card order.
pub(crate) type SplitPatterns = Vec<(String, Vec<String>)>;

/// The configs a card declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CardConfigs {
    /// Config name to its splits' patterns, in card order.
    pub(crate) configs: Vec<(String, SplitPatterns)>,
    /// The default config, if the card says which.
    pub(crate) default: Option<String>,
}

impl CardConfigs {
    /// The config names, in card order.
    pub(crate) fn names(&self) -> Vec<String> {
        self.configs.iter().map(|(n, _)| n.clone()).collect()
    }
}

/// The YAML header of a card: the text between a first line `---` and the
/// next line `---`; `None` when the card has none.
pub(crate) fn front_matter(card: &str) -> Option<&str> {
    let card = card.strip_prefix('\u{feff}').unwrap_or(card);
    let rest = card
        .strip_prefix("---\n")
        .or_else(|| card.strip_prefix("---\r\n"))?;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Some(&rest[..offset]);
        }
        offset += line.len();
    }
    None
}

fn patterns(value: &Value, what: &str) -> Result<Vec<String>, String> {
    match value {
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Sequence(items) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| format!("{what}: expected a path pattern, found {v:?}"))
            })
            .collect(),
        other => Err(format!(
            "{what}: expected a pattern or a list of patterns, found {other:?}"
        )),
    }
}

/// Adds `files` to split `split` of `out`, keeping the first position of a
/// split named twice.
fn add_split(out: &mut SplitPatterns, split: String, files: Vec<String>) {
    match out.iter_mut().find(|(s, _)| *s == split) {
        Some((_, have)) => have.extend(files),
        None => out.push((split, files)),
    }
}

fn data_files(value: &Value, config: &str) -> Result<SplitPatterns, String> {
    let what = format!("config {config:?}: data_files");
    let mut out = Vec::new();
    match value {
        Value::String(_) => out.push((DEFAULT_SPLIT.to_owned(), patterns(value, &what)?)),
        Value::Sequence(items) if items.iter().all(Value::is_string) => {
            out.push((DEFAULT_SPLIT.to_owned(), patterns(value, &what)?));
        }
        Value::Sequence(items) => {
            for item in items {
                let split = item
                    .get("split")
                    .map(|s| {
                        s.as_str()
                            .map(str::to_owned)
                            .ok_or_else(|| format!("{what}: split {s:?} is not a name"))
                    })
                    .transpose()?
                    .unwrap_or_else(|| DEFAULT_SPLIT.to_owned());
                let path = item
                    .get("path")
                    .ok_or_else(|| format!("{what}: an entry has no `path`"))?;
                add_split(&mut out, split, patterns(path, &what)?);
            }
        }
        Value::Mapping(map) => {
            for (split, path) in map {
                let split = split
                    .as_str()
                    .ok_or_else(|| format!("{what}: split {split:?} is not a name"))?;
                add_split(&mut out, split.to_owned(), patterns(path, &what)?);
            }
        }
        other => return Err(format!("{what}: not understood ({other:?})")),
    }
    Ok(out)
}

/// Reads the `configs:` block of a card's YAML header; `None` when the card
/// has no header or the header no `configs`.
pub(crate) fn parse_card(card: &str) -> Result<Option<CardConfigs>, String> {
    let Some(yaml) = front_matter(card) else {
        return Ok(None);
    };
    let header: Value = yaml_serde::from_str(yaml)
        .map_err(|e| format!("the dataset card's YAML header cannot be parsed: {e}"))?;
    let Some(configs) = header.get("configs") else {
        return Ok(None);
    };
    let Value::Sequence(items) = configs else {
        return Err("the dataset card's `configs` is not a list".to_owned());
    };
    let mut out = CardConfigs {
        configs: Vec::new(),
        default: None,
    };
    for item in items {
        let name = item
            .get("config_name")
            .and_then(Value::as_str)
            .unwrap_or(super::layout::DEFAULT_CONFIG)
            .to_owned();
        safe_component("config", &name).map_err(|e| e.to_string())?;
        if out.configs.iter().any(|(n, _)| *n == name) {
            return Err(format!("the dataset card declares config {name:?} twice"));
        }
        let files = match item.get("data_files") {
            Some(v) => data_files(v, &name)?,
            None => {
                return Err(format!(
                    "config {name:?} of the dataset card has no data_files"
                ));
            }
        };
        for (split, _) in &files {
            safe_component("split", split).map_err(|e| e.to_string())?;
        }
        if item.get("default").and_then(Value::as_bool) == Some(true) {
            if let Some(first) = &out.default {
                return Err(format!(
                    "the dataset card marks both {first:?} and {name:?} as the default config"
                ));
            }
            out.default = Some(name.clone());
        }
        out.configs.push((name, files));
    }
    if out.default.is_none() {
        out.default = match out.configs.as_slice() {
            [(only, _)] => Some(only.clone()),
            all => all
                .iter()
                .find(|(n, _)| n == super::layout::DEFAULT_CONFIG)
                .map(|(n, _)| n.clone()),
        };
    }
    Ok(Some(out))
}

/// A compiled `data_files` pattern, matched in time linear in the path
/// (globset compiles it to a regular expression; no backtracking).
pub(crate) struct Glob(GlobMatcher);

impl Glob {
    /// Compiles `pattern` with the semantics of the Hub's `fsspec` globs:
    /// `*` and `?` stay within one component, `**` spans any number of them,
    /// `[abc]`, `[a-z]` and `[!a]` match one character, an unclosed `[` and
    /// braces are literal characters, a backslash is an ordinary character
    /// and a leading `./` is ignored.
    pub(crate) fn new(pattern: &str) -> Result<Glob, String> {
        let stripped = pattern.trim_start_matches("./");
        // globset reads `{a,b}` as alternatives; fsspec does not.
        let mut escaped = String::with_capacity(stripped.len());
        let mut in_class = false;
        let mut class_start = 0;
        for (i, c) in stripped.char_indices() {
            match c {
                '[' if !in_class => {
                    if stripped[i + 1..].contains(']') {
                        in_class = true;
                        class_start = escaped.len();
                        escaped.push(c);
                    } else {
                        // An unclosed `[` is a literal `[`.
                        escaped.push_str("[[]");
                    }
                }
                ']' if in_class && escaped.len() > class_start + 1 => {
                    let body = &escaped[class_start + 1..];
                    // `[]...]` and `[!]...]`: a first `]` is a member.
                    if body != "!" && body != "^" {
                        in_class = false;
                    }
                    escaped.push(c);
                }
                '{' | '}' if !in_class => {
                    escaped.push('[');
                    escaped.push(c);
                    escaped.push(']');
                }
                _ => escaped.push(c),
            }
        }
        GlobBuilder::new(&escaped)
            .literal_separator(true)
            .backslash_escape(false)
            .allow_unclosed_class(true)
            .build()
            .map(|g| Glob(g.compile_matcher()))
            .map_err(|e| format!("the dataset card's pattern {pattern:?} is not a glob: {e}"))
    }

    /// Does the pattern match `path` (`/`-separated, relative to the repo root)?
    pub(crate) fn is_match(&self, path: &str) -> bool {
        self.0.is_match(path)
    }
}

/// Does `pattern` match `path`? A pattern that does not compile matches
/// nothing.
#[cfg(test)]
pub(crate) fn glob_match(pattern: &str, path: &str) -> bool {
    Glob::new(pattern).is_ok_and(|g| g.is_match(path))
}

/// The layout the card's configs give over the repo's `files`: each split's
/// parquet files, pattern by pattern (each pattern's matches sorted).
/// Configs whose patterns match no parquet file are left out (they may be
/// CSV or JSON, converted on the Hub's parquet branch); a pattern that
/// matches nothing at all is an error.
pub(crate) fn card_layout<'a>(
    card: &CardConfigs,
    files: impl IntoIterator<Item = &'a str> + Clone,
) -> Result<Layout, String> {
    let mut layout = Layout::new();
    for (config, splits) in &card.configs {
        let mut found: BTreeMap<String, SplitFiles> = BTreeMap::new();
        for (split, patterns) in splits {
            let mut matched: Vec<String> = Vec::new();
            for pattern in patterns {
                let glob = Glob::new(pattern)
                    .map_err(|e| format!("config {config:?}, split {split:?}: {e}"))?;
                let mut hits: Vec<&str> = files
                    .clone()
                    .into_iter()
                    .filter(|f| glob.is_match(f))
                    .collect();
                if hits.is_empty() {
                    return Err(format!(
                        "config {config:?}, split {split:?}: the dataset card's pattern \
                         {pattern:?} matches no file"
                    ));
                }
                hits.sort_unstable();
                if let Some(bad) = hits
                    .iter()
                    .find(|h| h.split('/').any(|c| safe_component("file", c).is_err()))
                {
                    return Err(format!(
                        "the repo lists the file {bad:?}, whose name is not a plain relative \
                         path; refusing it"
                    ));
                }
                for h in hits {
                    if h.ends_with(".parquet") && !matched.iter().any(|m| m == h) {
                        matched.push(h.to_owned());
                    }
                }
            }
            if !matched.is_empty() {
                found.insert(
                    split.clone(),
                    SplitFiles {
                        split: split.clone(),
                        partial: false,
                        files: matched,
                    },
                );
            }
        }
        if !found.is_empty() {
            layout.insert(config.clone(), found);
        }
    }
    Ok(layout)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CARD: &str = "---\r\nlicense: mit\r\nconfigs:\r\n- config_name: main\r\n  data_files:\r\n  - split: train\r\n    path: \"weird/dir/train-*.parquet\"\r\n  - split: test\r\n    path: [other/eval.parquet]\r\n  default: true\r\n- config_name: extra\r\n  data_files: \"extra/**/*.parquet\"\r\ndataset_info:\r\n  features: []\r\n---\r\n# A card\r\n\r\n---\r\n";

    #[test]
    fn front_matter_is_the_first_yaml_block() {
        assert_eq!(front_matter("---\na: 1\n---\nbody\n---\n"), Some("a: 1\n"));
        assert_eq!(front_matter("# no header\n---\n"), None);
        assert_eq!(front_matter("---\nunterminated: 1\n"), None);
        assert_eq!(front_matter("\u{feff}---\n---\n"), Some(""));
    }

    #[test]
    fn configs_in_every_documented_form() {
        let c = parse_card(CARD).unwrap().unwrap();
        assert_eq!(c.names(), ["main", "extra"]);
        assert_eq!(c.default.as_deref(), Some("main"));
        assert_eq!(
            c.configs[0].1,
            [
                (
                    "train".to_owned(),
                    vec!["weird/dir/train-*.parquet".to_owned()]
                ),
                ("test".to_owned(), vec!["other/eval.parquet".to_owned()]),
            ]
        );
        assert_eq!(
            c.configs[1].1,
            [("train".to_owned(), vec!["extra/**/*.parquet".to_owned()])]
        );
        // A mapping of splits, a list of patterns; one config is the default.
        let c = parse_card(
            "---\nconfigs:\n- config_name: a\n  data_files:\n    train: [x/*.parquet, y.parquet]\n    test: t.parquet\n---\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.default.as_deref(), Some("a"));
        assert_eq!(c.configs[0].1[0].1, ["x/*.parquet", "y.parquet"]);
        assert_eq!(c.configs[0].1[1].0, "test");
        // Several configs, one named `default`, none marked.
        let c = parse_card(
            "---\nconfigs:\n- config_name: a\n  data_files: a.parquet\n- config_name: default\n  data_files: [d.parquet]\n---\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.default.as_deref(), Some("default"));
        // No header, or no configs in it.
        assert_eq!(parse_card("# card").unwrap(), None);
        assert_eq!(parse_card("---\nlicense: mit\n---\n").unwrap(), None);
    }

    #[test]
    fn bad_cards_are_refused() {
        for (card, why) in [
            ("---\nconfigs: [\n---\n", "cannot be parsed"),
            ("---\nconfigs: 3\n---\n", "not a list"),
            ("---\nconfigs:\n- config_name: a\n---\n", "no data_files"),
            (
                "---\nconfigs:\n- config_name: ../x\n  data_files: a\n---\n",
                "not a plain directory name",
            ),
            (
                "---\nconfigs:\n- config_name: a\n  data_files:\n  - split: ../t\n    path: a\n---\n",
                "not a plain directory name",
            ),
            (
                "---\nconfigs:\n- config_name: a\n  data_files: a\n- config_name: a\n  data_files: b\n---\n",
                "twice",
            ),
            (
                "---\nconfigs:\n- config_name: a\n  data_files: a\n  default: true\n- config_name: b\n  data_files: b\n  default: true\n---\n",
                "both",
            ),
            (
                "---\nconfigs:\n- config_name: a\n  data_files:\n  - split: train\n---\n",
                "no `path`",
            ),
        ] {
            let e = parse_card(card).unwrap_err();
            assert!(e.contains(why), "{card:?}: {e}");
        }
    }

    #[test]
    fn globs_follow_the_hub() {
        for (p, s) in [
            ("data/train-*.parquet", "data/train-00000-of-00002.parquet"),
            ("weird/dir/train-*.parquet", "weird/dir/train-1.parquet"),
            ("**/*.parquet", "a.parquet"),
            ("**/*.parquet", "a/b/c.parquet"),
            ("extra/**/*.parquet", "extra/x.parquet"),
            ("extra/**", "extra/a/b"),
            ("d/?.parquet", "d/a.parquet"),
            ("d/[a-c]x.parquet", "d/bx.parquet"),
            ("d/[!a]x.parquet", "d/bx.parquet"),
            ("./a.parquet", "a.parquet"),
            ("d/[^a]x.parquet", "d/bx.parquet"),
            ("d/[]]x.parquet", "d/]x.parquet"),
            ("d/[x.parquet", "d/[x.parquet"),
            ("d/[x{a}.parquet", "d/[x{a}.parquet"),
            ("d/{a,b}.parquet", "d/{a,b}.parquet"),
            ("d\\*.parquet", "d\\x.parquet"),
            ("**", "a/b/c.parquet"),
            ("a/**/b/*.parquet", "a/x/y/b/z.parquet"),
        ] {
            assert!(glob_match(p, s), "{p} {s}");
        }
        for (p, s) in [
            ("data/*.parquet", "data/sub/x.parquet"),
            ("*.parquet", "a/b.parquet"),
            ("d/?.parquet", "d/ab.parquet"),
            ("d/[a-c]x.parquet", "d/dx.parquet"),
            ("d/[!a]x.parquet", "d/ax.parquet"),
            ("a.parquet", "a.parquet.lock"),
            ("d/{a,b}.parquet", "d/a.parquet"),
            ("d/[x.parquet", "d/x.parquet"),
            ("a/**/b/*.parquet", "a/x/y/c/z.parquet"),
        ] {
            assert!(!glob_match(p, s), "{p} {s}");
        }
    }

    #[test]
    fn globs_match_in_linear_time() {
        // A backtracking matcher tries every split of the name among the
        // stars: this ran for hours. A compiled matcher answers at once.
        let pattern = format!("{}*b.parquet", "*a".repeat(12));
        let name = format!("{}.parquet", "a".repeat(52));
        let start = std::time::Instant::now();
        assert!(!glob_match(&pattern, &name));
        let names: Vec<String> = (0..200).map(|i| format!("{}{i}", "a".repeat(60))).collect();
        let card = format!("---\nconfigs:\n- config_name: a\n  data_files: \"{pattern}\"\n---\n");
        let c = parse_card(&card).unwrap().unwrap();
        let e = card_layout(&c, names.iter().map(String::as_str)).unwrap_err();
        assert!(e.contains("matches no file"), "{e}");
        assert!(
            start.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn layout_from_the_card_not_from_paths() {
        let c = parse_card(CARD).unwrap().unwrap();
        let files = [
            "README.md",
            "weird/dir/train-1.parquet",
            "weird/dir/train-0.parquet",
            "other/eval.parquet",
            "extra/a/b/x.parquet",
            "data/train-00000-of-00001.parquet",
        ];
        let l = card_layout(&c, files).unwrap();
        assert_eq!(l.keys().collect::<Vec<_>>(), ["extra", "main"]);
        assert_eq!(
            l["main"]["train"].files,
            ["weird/dir/train-0.parquet", "weird/dir/train-1.parquet"]
        );
        assert_eq!(l["main"]["test"].files, ["other/eval.parquet"]);
        assert_eq!(l["extra"]["train"].files, ["extra/a/b/x.parquet"]);
        // A pattern matching nothing names the config, split and pattern.
        let e = card_layout(&c, ["weird/dir/train-0.parquet"]).unwrap_err();
        assert!(e.contains("\"other/eval.parquet\" matches no file"), "{e}");
        // CSV-only configs are left out (the parquet branch has them).
        let c = parse_card("---\nconfigs:\n- config_name: csv\n  data_files: \"*.csv\"\n---\n")
            .unwrap()
            .unwrap();
        assert!(card_layout(&c, ["a.csv"]).unwrap().is_empty());
        // Remote names that could escape are refused, as for guessed layouts.
        let c =
            parse_card("---\nconfigs:\n- config_name: a\n  data_files: \"**/*.parquet\"\n---\n")
                .unwrap()
                .unwrap();
        assert!(
            card_layout(&c, ["a/../../x.parquet"])
                .unwrap_err()
                .contains("not a plain relative path")
        );
    }
}
