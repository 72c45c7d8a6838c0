//! The error type of `loaderx-candle`.

/// Errors converting loaderx data to candle tensors.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// loaderx failed (store, loader).
    #[error(transparent)]
    Core(#[from] loaderx_core::Error),
    /// candle failed (allocation, device transfer).
    #[error(transparent)]
    Candle(#[from] candle_core::Error),
    /// A value does not fit the candle type it maps to (u64 above `i64::MAX`).
    #[error("{dtype} value {value} does not fit candle's {target:?}; no lossless mapping")]
    OutOfRange {
        /// The store's element type.
        dtype: loaderx_core::DType,
        /// The offending value.
        value: String,
        /// The candle type it would map to.
        target: candle_core::DType,
    },
    /// The column is not of the contract the call needs.
    #[error("column is {found}, expected {expected}")]
    Kind {
        /// What the call needs.
        expected: loaderx_core::StoreKind,
        /// What the column is.
        found: loaderx_core::StoreKind,
    },
    /// A loaderx element type this version cannot map to candle.
    #[error("no candle type for loaderx {0}")]
    Unsupported(loaderx_core::DType),
    /// The batch has no stream of that name.
    #[error("the batch has no stream {0:?}")]
    MissingStream(String),
}

/// A specialised `Result` for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
