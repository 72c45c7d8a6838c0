//! Entry points for the fuzz targets of `loaderx-fuzz` (feature
//! `fuzzing`, not part of the stable API): the converter's readers of
//! untrusted input, driven as a conversion drives them.

use std::path::Path;

use indicatif::ProgressBar;
use loaderx_core::Codec;

use super::card::{card_layout, parse_card};
use crate::error::Error;
use crate::output::StagedRoot;
use crate::parquet_file::file::ParquetFile;
use crate::table::convert::{Settings, SplitSource, convert_split};
use crate::table::text::TextEncoder;

/// One split the dataset card chose: config, split and its parquet files.
pub type CardSplit = (String, String, Vec<String>);

/// Reads the `configs:` block of `card` (a dataset card's `README.md`) and
/// lays it out over the repo's file names `files`, as a conversion does.
///
/// # Errors
///
/// The message a conversion reports for a card it refuses.
pub fn card_splits(card: &str, files: &[&str]) -> Result<Vec<CardSplit>, String> {
    let Some(configs) = parse_card(card)? else {
        return Ok(Vec::new());
    };
    let layout = card_layout(&configs, files.iter().copied())?;
    Ok(layout
        .into_iter()
        .flat_map(|(config, splits)| {
            splits
                .into_values()
                .map(move |s| (config.clone(), s.split, s.files))
        })
        .collect())
}

/// Converts the parquet file `file` as split `train` into the new output
/// root `out` (removed again, never published): every column, strings as
/// their UTF-8 bytes, rows with nulls or empty values dropped, small write
/// batches. Returns the records written.
///
/// # Errors
///
/// Any [`Error`] the conversion reports.
pub fn convert_parquet_file(file: &Path, out: &Path) -> Result<u64, Error> {
    let settings = Settings {
        codec: crate::codec::CodecChoice::Fixed(Codec::Raw),
        shards: 1,
        generation: loaderx_core::Generation::DEFAULT,
        max_records: 64,
        max_bytes: 1 << 20,
        columns: Vec::new(),
        drop: Vec::new(),
        text: TextEncoder::Bytes,
        drop_null_rows: true,
        drop_empty_rows: true,
        image_mode: None,
        images: crate::table::ImageStorage::Auto,
    };
    let root = StagedRoot::new(out)?;
    let table = ParquetFile::open(file, "train.parquet")?;
    let split = SplitSource {
        name: "train".to_owned(),
        partial: false,
        tables: vec![Box::new(table)],
        context: "fuzz".to_owned(),
        part: None,
    };
    let summary = convert_split(&root, &split, &settings, &ProgressBar::hidden())?;
    Ok(summary.records)
}
