//! The error type of `loaderx-tch`.

/// Errors converting loaderx data to tch tensors.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// loaderx failed (store, loader).
    #[error(transparent)]
    Core(#[from] loaderx_core::Error),
    /// libtorch failed (allocation, device transfer).
    #[error(transparent)]
    Tch(#[from] tch::TchError),
    /// A value does not fit the tch kind it maps to (u64 above `i64::MAX`).
    #[error("{dtype} value {value} does not fit tch's {target:?}; no lossless mapping")]
    OutOfRange {
        /// The store's element type.
        dtype: loaderx_core::DType,
        /// The offending value.
        value: String,
        /// The kind it would map to.
        target: tch::Kind,
    },
    /// A loaderx element type this version cannot map to tch.
    #[error("no tch kind for loaderx {0}")]
    Unsupported(loaderx_core::DType),
    /// The column is not of the contract the call needs.
    #[error("column is {found}, expected {expected}")]
    Kind {
        /// What the call needs.
        expected: loaderx_core::StoreKind,
        /// What the column is.
        found: loaderx_core::StoreKind,
    },
    /// The batch has no stream of that name.
    #[error("the batch has no stream {0:?}")]
    MissingStream(String),
}

/// A specialised `Result` for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
