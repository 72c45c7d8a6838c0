//! The error type of `loaderx-tch`.

/// Errors converting loaderx data to tch tensors.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// loaderx failed (store, loader, a value out of range for its mapped
    /// kind: [`ErrorKind::OutOfRange`](loaderx_core::ErrorKind::OutOfRange), a
    /// column of the other contract:
    /// [`ErrorKind::ColumnKind`](loaderx_core::ErrorKind::ColumnKind)).
    #[error(transparent)]
    Core(#[from] loaderx_core::Error),
    /// libtorch failed (allocation, device transfer).
    #[error(transparent)]
    Tch(#[from] tch::TchError),
}

/// A specialised `Result` for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
