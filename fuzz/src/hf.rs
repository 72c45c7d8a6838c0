//! Fuzz targets for `loaderx-convert`'s Hugging Face readers: the dataset
//! card (YAML front matter and `data_files` globs) and parquet files
//! through the converter's reader.

use std::fs;

use loaderx_convert::hf::fuzzing;

use crate::input::scratch_dir;

/// The input is a dataset card, then a NUL byte, then the repo's file
/// names, one a line. The card's configs are laid out over the files; what
/// a layout chooses must be parquet files of the repo, each once per split.
pub fn card(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let text: &str = &text;
    let (card, names) = text.split_once('\0').unwrap_or((text, ""));
    let files: Vec<&str> = names.split('\n').filter(|n| !n.is_empty()).collect();
    let Ok(splits) = fuzzing::card_splits(card, &files) else {
        return;
    };
    for (config, split, chosen) in splits {
        assert!(
            !chosen.is_empty(),
            "config {config:?} split {split:?} chose no file"
        );
        for (i, file) in chosen.iter().enumerate() {
            assert!(
                file.ends_with(".parquet") && files.contains(&file.as_str()),
                "config {config:?} split {split:?} chose {file:?}, not a parquet file of the repo"
            );
            assert!(
                !chosen[..i].contains(file),
                "config {config:?} split {split:?} chose {file:?} twice"
            );
        }
    }
}

/// The input is a parquet file, converted as one split (every column,
/// strings as bytes, rows with nulls or empty values dropped) into a
/// scratch output root that is never published.
pub fn parquet(data: &[u8]) {
    let dir = scratch_dir();
    if let Err(e) = fs::create_dir_all(&dir) {
        panic!("cannot make the scratch directory {}: {e}", dir.display());
    }
    let file = dir.join("train.parquet");
    if let Err(e) = fs::write(&file, data) {
        panic!("cannot write {}: {e}", file.display());
    }
    let out = dir.join("out");
    if out.exists() {
        // Only a published root would be left; this target never publishes.
        panic!(
            "{} exists: a conversion left its output behind",
            out.display()
        );
    }
    let _ = fuzzing::convert_parquet_file(&file, &out);
    assert!(
        !out.exists(),
        "an unpublished conversion left {}",
        out.display()
    );
}
