//! The README's `loaderx` commands, run as a newcomer runs them: every
//! `loaderx …` line of README.md's `sh` blocks, in a directory holding the
//! files the quick start names (`tests/python/make_readme_fixtures.py`),
//! each one must succeed with no other flag. Then what they wrote is what
//! the README's Rust programs open (tests/docs_snippets.rs runs those):
//! `stores/train/{data,label}` Dense `u8 (28, 28)` and `i64`, the parquet
//! text column as UTF-8 bytes, the photographs of several sizes encoded
//! with their class names.

#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;

use loaderx_core::{Dense, Ragged};

/// Every `loaderx …` command line of the README's `sh` blocks, as
/// [`documented_commands`] reads them.
fn readme_commands() -> Vec<Vec<String>> {
    documented_commands()
        .into_iter()
        .filter(|(place, _)| place.starts_with("README.md:"))
        .map(|(_, args)| args)
        .collect()
}

fn run_in(dir: &Path, args: &[String]) -> String {
    let out = support::command()
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "`loaderx {}` failed:\n{}\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_readme_commands_run_on_a_newcomers_files_and_write_what_its_programs_open() {
    let Some(py) = support::python(&["numpy", "datasets", "PIL"]) else {
        return;
    };
    let dir = support::write_fixtures(&py, "make_readme_fixtures.py", "readme");
    let commands = readme_commands();
    assert!(
        commands.iter().any(|c| c[0] == "convert") && commands.iter().any(|c| c[0] == "info"),
        "the README's quick start lost its commands: {commands:?}"
    );
    for command in &commands {
        run_in(&dir, command);
    }

    // The arrays: the stream names and dtypes the README's programs use.
    let data = Dense::<u8>::open(dir.join("stores/train/data")).unwrap();
    assert_eq!((data.len(), data.item_shape()), (300, &[28usize, 28][..]));
    assert_eq!(
        Dense::<i64>::open(dir.join("stores/train/label"))
            .unwrap()
            .len(),
        300
    );

    // The parquet text column, as UTF-8 bytes, without a flag.
    let text = Ragged::<u8>::open(dir.join("text/train/text")).unwrap();
    let third = text.gather(&[3]).unwrap();
    assert_eq!(
        third.data(0),
        "review 3: good good good and fine".as_bytes()
    );

    // The CSV: one store per column, the string column as UTF-8 bytes.
    for column in ["id", "score", "name", "ok"] {
        assert!(
            dir.join("table/train")
                .join(column)
                .join("meta.zr")
                .is_file(),
            "{column}"
        );
    }

    // The photographs of several sizes: encoded by default, with classes.
    let images = Ragged::<u8>::open(dir.join("images/train/image")).unwrap();
    assert_eq!(images.len(), 40);
    let first = images.gather(&[0]).unwrap();
    assert_eq!(
        &first.data(0)[..3],
        &[0xff, 0xd8, 0xff],
        "not the JPEG's bytes"
    );
    assert_eq!(
        first.data(0),
        std::fs::read(dir.join("photos/cat/000.jpg"))
            .unwrap()
            .as_slice()
    );
    let classes = std::fs::read_to_string(dir.join("images/train/classes.json")).unwrap();
    assert!(
        classes.contains("cat") && classes.contains("dog"),
        "{classes}"
    );
}

/// The `loaderx …` commands of every `sh` block of the README, docs/*.md
/// and the crates' and examples' READMEs: `(file:line, arguments)`, with
/// continuation lines joined, a `$ ` prompt, comments and what follows an
/// unquoted `&`, `;`, `|` or `>` cut, quotes removed and shell variables
/// given a value.
fn documented_commands() -> Vec<(String, Vec<String>)> {
    let root = support::repo_root();
    let mut pages = vec![root.join("README.md")];
    for dir in [
        "docs",
        "loaderx-core",
        "loaderx-convert",
        "loaderx-cli",
        "loaderx-burn",
        "loaderx-candle",
        "loaderx-tch",
    ] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    for entry in std::fs::read_dir(root.join("examples")).unwrap() {
        let readme = entry.unwrap().path().join("README.md");
        if readme.is_file() {
            pages.push(readme);
        }
    }
    pages.sort();
    let mut found = Vec::new();
    for page in pages {
        let text = std::fs::read_to_string(&page).unwrap();
        let name = page.strip_prefix(&root).unwrap().display().to_string();
        let mut in_sh = false;
        let mut pending: Option<(usize, String)> = None;
        for (i, line) in text.lines().enumerate() {
            let t = line.trim();
            if let Some(info) = t.strip_prefix("```") {
                in_sh = !in_sh && matches!(info.trim(), "sh" | "bash" | "console");
                continue;
            }
            if !in_sh {
                continue;
            }
            let (start, mut joined) = match pending.take() {
                Some((start, so_far)) => (start, so_far + " " + t),
                None => {
                    let t = t.strip_prefix("$ ").unwrap_or(t);
                    if !t.starts_with("loaderx ") {
                        continue;
                    }
                    (i + 1, t.to_owned())
                }
            };
            if let Some(cut) = joined.strip_suffix('\\') {
                pending = Some((start, cut.trim_end().to_owned()));
                continue;
            }
            joined = joined.trim().to_owned();
            found.push((format!("{name}:{start}"), shell_words(&joined)));
        }
    }
    found
}

/// Words of one shell command line, as sh splits them (quotes, `#`
/// comments, and the end of the command at `&`, `;`, `|` or `>`), with
/// `$VAR` and `${VAR}` replaced by `0`; the first word (`loaderx`) dropped.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    word.push(q);
                }
            }
            '"' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == '"' {
                        break;
                    }
                    word.push(q);
                }
            }
            '$' if chars
                .peek()
                .is_some_and(|n| n.is_ascii_alphabetic() || *n == '{' || *n == '_') =>
            {
                in_word = true;
                let braced = chars.peek() == Some(&'{');
                if braced {
                    chars.next();
                }
                while let Some(&n) = chars.peek() {
                    if braced && n == '}' {
                        chars.next();
                        break;
                    }
                    if !(braced || n.is_ascii_alphanumeric() || n == '_') {
                        break;
                    }
                    chars.next();
                }
                word.push('0');
            }
            '#' if !in_word => break,
            '&' | ';' | '|' | '>' => break,
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words.into_iter().skip(1).collect()
}

#[test]
fn every_loaderx_command_in_the_docs_parses() {
    let commands = documented_commands();
    assert!(
        commands.len() >= 30,
        "only {} documented commands found",
        commands.len()
    );
    let mut refused = Vec::new();
    for (place, args) in &commands {
        let out = support::command()
            .args(args)
            .env("LOADERX_PARSE_ONLY", "1")
            .output()
            .unwrap();
        if !out.status.success() {
            refused.push(format!(
                "{place}: loaderx {}\n{}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    assert!(
        refused.is_empty(),
        "documented commands the CLI refuses:\n\n{}",
        refused.join("\n\n")
    );
}

#[test]
fn the_readme_stays_a_front_door() {
    // Install, quick start, links: the rest lives in docs/ and bench/.
    let readme = support::repo_root().join("README.md");
    let bytes = std::fs::metadata(&readme).unwrap().len();
    assert!(
        bytes <= 14 * 1024,
        "README.md is {bytes} bytes, over 14 KiB: move detail to docs/"
    );
}
