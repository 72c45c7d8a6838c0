//! Reading local parquet files defensively: the footer and every page
//! header are walked before the parquet crate decodes them, and a panic
//! inside the crate is an error naming the file.

mod delta_pages;
pub(crate) mod file;
mod metadata_types;
pub(crate) mod source_file;

/// Rows a parquet file declares (0 when unreadable, even if the parquet
/// crate panics on it; the conversion reports the real problem).
#[cfg(feature = "hf")]
pub(crate) fn parquet_rows(path: &std::path::Path) -> u64 {
    let rows = || {
        std::fs::File::open(path)
            .and_then(source_file::SourceFile::new)
            .ok()
            .filter(|f| source_file::check_footer(f).is_ok())
            .and_then(|f| parquet::file::reader::SerializedFileReader::new(f).ok())
            .map(|r| {
                use parquet::file::reader::FileReader;
                u64::try_from(r.metadata().file_metadata().num_rows()).unwrap_or(0)
            })
            .unwrap_or(0)
    };
    std::panic::catch_unwind(rows).unwrap_or(0)
}
