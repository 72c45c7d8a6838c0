//! The error type of `loaderx-tch`.

/// Errors converting loaderx data to tch tensors.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// loaderx failed (store, loader, a value out of range for its mapped
    /// kind: [`ErrorKind::OutOfRange`](loaderx_core::ErrorKind::OutOfRange)).
    #[error(transparent)]
    Core(#[from] loaderx_core::Error),
    /// libtorch failed (allocation, device transfer).
    #[error(transparent)]
    Tch(#[from] tch::TchError),
    /// The column is not of the contract the call needs.
    #[error("column is {found}, expected {expected}")]
    Kind {
        /// What the call needs.
        expected: loaderx_core::StoreKind,
        /// What the column is.
        found: loaderx_core::StoreKind,
    },
}

/// A specialised `Result` for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
