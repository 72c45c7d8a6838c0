//! Reading local parquet files defensively: the footer and every page
//! header are walked before the parquet crate decodes them, and a panic
//! inside the crate is an error naming the file.

mod delta_pages;
pub(crate) mod file;
mod metadata_types;
pub(crate) mod source_file;
