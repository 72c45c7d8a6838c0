//! Converters from other dataset formats to Zrecord stores.
//!
//! - [`hf`] (feature `hf`): Hugging Face Hub datasets (parquet, images).
//! - [`idx`] (feature `idx`): the IDX files of MNIST and Fashion-MNIST.
//!
//! Every converter writes a root of aligned split/column stores,
//! `OUT/<split>/<column>/`, built in a hidden temporary sibling of `OUT`
//! that is renamed into place only when every store closed and all record
//! counts of a split agree ([`output::StagedRoot`]).

#[cfg(feature = "hf")]
pub mod hf;
#[cfg(feature = "idx")]
pub mod idx;
pub mod output;

use crate::error::{Error, ErrorKind};

#[cfg_attr(not(any(feature = "idx", feature = "hf")), allow(dead_code))]
pub(crate) fn convert_error(source_name: impl Into<String>, detail: impl Into<String>) -> Error {
    ErrorKind::Convert {
        source_name: source_name.into(),
        detail: detail.into(),
    }
    .into()
}
