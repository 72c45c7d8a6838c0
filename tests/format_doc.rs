//! `docs/format.md` against the format's source of truth, the module
//! documentation of `loaderx-core/src/format/mod.rs`: the directory layout
//! and every row of the `meta.zr` table must appear in the document verbatim.

use std::path::Path;

fn read(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `//!` lines of `source`, without the marker.
fn module_doc(source: &str) -> Vec<String> {
    source
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(|l| l.strip_prefix(' ').unwrap_or(l).to_owned())
        .collect()
}

#[test]
fn format_document_matches_the_format_module() {
    let doc = module_doc(&read("loaderx-core/src/format/mod.rs"));
    let md = read("docs/format.md");

    let rows: Vec<&String> = doc.iter().filter(|l| l.starts_with('|')).collect();
    assert!(
        rows.len() >= 8,
        "the module's meta.zr table is gone: {rows:?}"
    );
    for row in rows {
        assert!(
            md.lines().any(|l| l == row),
            "docs/format.md lacks the meta.zr row {row:?} of format/mod.rs"
        );
    }

    let start = doc
        .iter()
        .position(|l| l == "```text")
        .unwrap_or_else(|| panic!("format/mod.rs has no directory layout block"));
    let len = doc[start + 1..]
        .iter()
        .position(|l| l == "```")
        .unwrap_or_else(|| panic!("unterminated layout block in format/mod.rs"));
    let tree = doc[start..start + len + 2].join("\n");
    assert!(
        md.contains(&tree),
        "docs/format.md lacks the directory layout of format/mod.rs:\n{tree}"
    );
}

#[test]
fn format_document_states_the_layout_constants() {
    // The same numbers as the corruption tests' independent layout
    // (`loaderx-core/tests/support`), which are checked against real stores.
    let md = read("docs/format.md");
    for row in [
        "| 0..8 ",
        "| 8..10 ",
        "| 10 ",
        "| 11 ",
        "| 12..16 ",
        "| 16..2056 ",
        "| 2056..4096 ",
        "| 4096 + 16 i ",
    ] {
        assert!(
            md.lines().any(|l| l.starts_with(row)),
            "docs/format.md has no row starting {row:?}"
        );
    }
}
