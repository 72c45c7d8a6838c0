//! Turns every `rust` code block of README.md, docs/*.md and the published
//! crates' READMEs (what crates.io shows) into a module of
//! the `docs_snippets` test (`$OUT_DIR/snippets.rs`), so that the docs'
//! code is compiled by the test build and run by the test run: a snippet
//! can never rot.
//!
//! A block with a `fn main` keeps it (the test calls it); any other block
//! becomes the body of a function returning `Result<(), Box<dyn Error>>`,
//! as rustdoc does. Info strings: `rust` compiles and runs, `rust,no_run`
//! only compiles (object storage, GPUs); `rust,ignore` is refused (a
//! compile error naming the block), as is any other flag.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"))
        .parent()
        .expect("tests/ is inside the workspace")
        .to_path_buf();
    let mut sources = vec![root.join("README.md")];
    let docs = root.join("docs");
    let mut pages: Vec<PathBuf> = std::fs::read_dir(&docs)
        .expect("docs/ is readable")
        .map(|e| e.expect("docs/ is readable").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    sources.extend(pages);
    for krate in [
        "loaderx-core",
        "loaderx-convert",
        "loaderx-cli",
        "loaderx-burn",
        "loaderx-candle",
        "loaderx-tch",
    ] {
        sources.push(root.join(krate).join("README.md"));
    }
    println!("cargo:rerun-if-changed={}", docs.display());

    let mut out = String::new();
    let mut table = String::from(
        "/// Every snippet, in file and line order.\npub(crate) const SNIPPETS: &[Snippet] = &[\n",
    );
    for path in &sources {
        println!("cargo:rerun-if-changed={}", path.display());
        let text = std::fs::read_to_string(path).expect("a doc page is readable");
        let rel = path
            .strip_prefix(&root)
            .expect("inside the workspace")
            .display()
            .to_string();
        for block in blocks(&text) {
            let module = format!(
                "{}_{}",
                rel.replace(['/', '.', '-'], "_").to_lowercase(),
                block.line
            );
            let mut flags = block.info.split(',').map(str::trim).skip(1);
            let mut run = true;
            let mut refused = None;
            for flag in flags.by_ref() {
                match flag {
                    "no_run" => run = false,
                    other => refused = Some(other.to_owned()),
                }
            }
            let _ = writeln!(out, "// {rel}:{}", block.line);
            if let Some(flag) = refused {
                let _ = writeln!(
                    out,
                    "compile_error!(\"{rel}:{}: a `rust,{flag}` block: every rust block of the docs is compiled (use `rust` or `rust,no_run`)\");",
                    block.line
                );
                continue;
            }
            let _ = writeln!(
                out,
                "#[allow(unused, dead_code, missing_docs, unreachable_pub, clippy::all, clippy::pedantic, clippy::unwrap_used)]\nmod {module} {{"
            );
            if has_main(&block.code) {
                out.push_str(&block.code);
                out.push_str("\npub(crate) fn snippet_run() -> Result<(), Box<dyn std::error::Error>> {\n    super::into_result(main())\n}\n");
            } else {
                out.push_str(
                    "pub(crate) fn snippet_run() -> Result<(), Box<dyn std::error::Error>> {\n",
                );
                out.push_str(&block.code);
                out.push_str("\n    #[allow(unreachable_code)]\n    Ok(())\n}\n");
            }
            out.push_str("}\n");
            let _ = writeln!(
                table,
                "    Snippet {{ file: {rel:?}, line: {}, run: {run}, main: {module}::snippet_run }},",
                block.line
            );
        }
    }
    table.push_str("];\n");
    out.push_str(&table);
    let dest = Path::new(&std::env::var_os("OUT_DIR").expect("cargo sets it")).join("snippets.rs");
    std::fs::write(dest, out).expect("OUT_DIR is writable");
}

/// A fenced code block whose info string starts with `rust`.
struct Block {
    /// The info string (`rust,no_run`).
    info: String,
    /// The 1-based line of the opening fence.
    line: usize,
    /// The code between the fences.
    code: String,
}

/// The `rust` blocks of a Markdown page.
fn blocks(text: &str) -> Vec<Block> {
    let mut found = Vec::new();
    let mut open: Option<(String, usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        match open.take() {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    let info = info.trim().to_owned();
                    open = Some((info, i + 1, String::new()));
                }
            }
            Some((info, start, mut code)) => {
                if trimmed.starts_with("```") {
                    if info == "rust" || info.starts_with("rust,") {
                        found.push(Block {
                            info,
                            line: start,
                            code,
                        });
                    }
                } else {
                    code.push_str(line);
                    code.push('\n');
                    open = Some((info, start, code));
                }
            }
        }
    }
    found
}

/// Whether the block defines its own `fn main`.
fn has_main(code: &str) -> bool {
    code.lines().any(|l| l.trim_start().starts_with("fn main("))
}
