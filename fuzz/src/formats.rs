//! Fuzz targets of the parsers of users' files the converters and the
//! vision stage read: JSON lines through the table layer ([`jsonl`]),
//! `.npy` files and `.npz` archives ([`npy`]), WebDataset tar shards, plain
//! or gzip-compressed ([`webdataset`]), and crop-first JPEG decoding on
//! arbitrary bytes and crop boxes ([`jpeg_crop`]).
//!
//! The three converter targets write the input to a file in a scratch
//! directory and run the public conversion on it, exactly as
//! `loaderx convert` does. A conversion may fail (the input is hostile);
//! one that succeeds must have written stores that open and read whole,
//! with the record count it reported, and must leave nothing but its
//! output behind.

use std::fs;
use std::path::{Path, PathBuf};

use loaderx_convert::jsonl::{JsonlOptions, convert_jsonl};
use loaderx_convert::local::LocalSource;
use loaderx_convert::npy::{NpyOptions, convert_npy};
use loaderx_convert::table::TableOptions;
use loaderx_convert::webdataset::{WebDataset, convert_webdataset};
use loaderx_core::vision::{DrawKey, Pipeline};
use loaderx_core::{Codec, Store};

use crate::input::scratch_dir;

/// A fresh, empty scratch directory for one run.
fn fresh() -> PathBuf {
    let dir = scratch_dir();
    if dir.exists()
        && let Err(e) = fs::remove_dir_all(&dir)
    {
        panic!("cannot empty the scratch directory {}: {e}", dir.display());
    }
    if let Err(e) = fs::create_dir_all(&dir) {
        panic!("cannot make the scratch directory {}: {e}", dir.display());
    }
    dir
}

/// Writes `data` to `dir/name`.
fn put(dir: &Path, name: &str, data: &[u8]) -> PathBuf {
    let file = dir.join(name);
    if let Err(e) = fs::write(&file, data) {
        panic!("cannot write {}: {e}", file.display());
    }
    file
}

/// Every store under a published root: the directories holding `meta.zr`.
fn stores(root: &Path, found: &mut Vec<PathBuf>) {
    if root.join("meta.zr").is_file() {
        found.push(root.to_path_buf());
        return;
    }
    let Ok(entries) = fs::read_dir(root) else {
        return;
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for d in dirs {
        stores(&d, found);
    }
}

/// The promises of a conversion that succeeded: every store it wrote opens
/// and reads whole, and each holds `records` records.
fn check_output(out: &Path, records: u64) {
    let mut found = Vec::new();
    stores(out, &mut found);
    assert!(
        !found.is_empty() || records == 0,
        "a conversion of {records} records wrote no store under {}",
        out.display()
    );
    for path in found {
        let store = Store::open(&path)
            .unwrap_or_else(|e| panic!("{}: a converted store does not open: {e}", path.display()));
        assert_eq!(
            store.len(),
            records,
            "{}: the store holds another record count than the conversion reported",
            path.display()
        );
        if let Err(e) = loaderx_core::digest(&store) {
            panic!("{}: a converted store does not read: {e}", path.display());
        }
    }
}

/// Table options every table target converts with: strings as bytes (so
/// text columns convert rather than fail), raw stores (the fuzzer's time
/// goes to parsing, not to zstd), one shard.
fn table_options(encoded: bool) -> TableOptions {
    TableOptions::new()
        .text_bytes()
        .encoded_images(encoded)
        .codec(Codec::Raw)
        .shards(1)
}

/// The input is a JSON-lines file, converted as one split (types inferred
/// from its first lines) with strings as bytes.
pub fn jsonl(data: &[u8]) {
    let _ = jsonl_converts(data);
}

/// [`jsonl`], returning the conversion's error (the seeds must convert).
pub fn jsonl_converts(data: &[u8]) -> Result<(), String> {
    let dir = fresh();
    let file = put(&dir, "train.jsonl", data);
    let out = dir.join("out");
    let source = LocalSource::new([file]).options(table_options(false));
    let options = JsonlOptions::new().infer_rows(64).max_line_bytes(1 << 20);
    let result = convert_jsonl(&source, &options, &out);
    table_outcome(
        &out,
        result.map(|s| s.splits.first().map_or(0, |s| s.records)),
    )
}

/// Checks a table conversion's outcome: its output when it succeeded,
/// nothing left at `out` when it failed.
fn table_outcome(out: &Path, result: Result<u64, loaderx_convert::Error>) -> Result<(), String> {
    match result {
        Ok(records) => {
            check_output(out, records);
            Ok(())
        }
        Err(e) => {
            assert!(!out.exists(), "a failed conversion left {}", out.display());
            Err(e.to_string())
        }
    }
}

/// The input's first byte chooses the file kind (even: a `.npy` file, odd:
/// an `.npz` archive), the rest is the file, converted as split `train`.
pub fn npy(data: &[u8]) {
    let _ = npy_converts(data);
}

/// [`npy`], returning the conversion's error (the seeds must convert).
pub fn npy_converts(data: &[u8]) -> Result<(), String> {
    let Some((&kind, file)) = data.split_first() else {
        return Err("empty input".into());
    };
    let dir = fresh();
    let name = if kind % 2 == 0 { "x.npy" } else { "arrays.npz" };
    let file = put(&dir, name, file);
    let out = dir.join("out");
    let result = convert_npy(&[file], &out, &NpyOptions::new(Codec::Raw, 1));
    table_outcome(&out, result.map(|s| s.records))
}

/// The input is one WebDataset shard (gzip-compressed when it starts with
/// gzip's magic bytes), converted as split `train`; its first byte's
/// lowest bit chooses whether images are kept encoded or decoded.
pub fn webdataset(data: &[u8]) {
    let _ = webdataset_converts(data);
}

/// [`webdataset`], returning the conversion's error (the seeds must
/// convert).
pub fn webdataset_converts(data: &[u8]) -> Result<(), String> {
    let gz = data.starts_with(&[0x1f, 0x8b]);
    let encoded = data.first().is_some_and(|b| b & 1 == 1);
    let dir = fresh();
    let name = if gz { "shard.tar.gz" } else { "shard.tar" };
    let file = put(&dir, name, data);
    let out = dir.join("out");
    let source = WebDataset::new([file]).options(table_options(encoded));
    let result = convert_webdataset(&source, &out);
    table_outcome(
        &out,
        result.map(|s| s.splits.first().map_or(0, |s| s.records)),
    )
}

/// Bytes of [`jpeg_crop`]'s input before the image: the pipeline, its
/// output size, the draw key.
pub const JPEG_CROP_HEADER: usize = 12;

/// The input is a 12-byte header (byte 0: the pipeline, bytes 1 and 2:
/// the output height and width, 1 to 64, bytes 4..12: the draw key), then
/// an encoded image. It is decoded by the pipeline crop-first
/// (`reduced_decode(true)`: only the box's rows and iMCU columns, at a
/// reduced scale) and in full (`reduced_decode(false)`); an image the full
/// decode reads must not be refused crop-first (valid JPEGs once were, by
/// their sampling factors), and both fill the output.
pub fn jpeg_crop(data: &[u8]) {
    if data.len() < JPEG_CROP_HEADER {
        return;
    }
    let (head, image) = data.split_at(JPEG_CROP_HEADER);
    let h = u32::from(head[1] % 64) + 1;
    let w = u32::from(head[2] % 64) + 1;
    let mut key = [0u8; 8];
    key.copy_from_slice(&head[4..12]);
    let key = DrawKey::from_raw(u64::from_le_bytes(key));
    let base = match head[0] % 4 {
        0 => Pipeline::new().center_crop((h, w)),
        1 => Pipeline::new().random_resized_crop((h, w), (0.08, 1.0), (0.75, 4.0 / 3.0)),
        2 => Pipeline::new().resize(h.min(w)).center_crop((h, w)),
        _ => Pipeline::new()
            .random_resized_crop((h, w), (0.01, 0.2), (0.5, 2.0))
            .hflip(0.5),
    }
    // The fuzzer should spend its time on headers and entropy data, not
    // on decoding huge frames.
    .max_pixels(1 << 22);
    let Ok(bytes) = base.record_bytes() else {
        panic!("a valid pipeline has no record size");
    };
    let mut out = vec![0u8; bytes];
    let full = base
        .clone()
        .reduced_decode(false)
        .apply(image, key, &mut out);
    let crop = base.reduced_decode(true).apply(image, key, &mut out);
    if let (Ok(()), Err(e)) = (&full, &crop) {
        panic!("the full decode reads the image, the crop-first decode refuses it: {e}");
    }
}
